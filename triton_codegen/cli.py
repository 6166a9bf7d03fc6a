"""The `tir-triton` command line: run and inspect the pass pipeline, compile, check, tune.

Errors are one paragraph on stderr with a non-zero exit code; `--debug` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from triton_codegen.backend import REGISTERED
from triton_codegen.cli_grad import cmd_grad
from triton_codegen.environment import default_fp_fusion


def _add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", metavar="FILE.py[:FUNC]", help="a Python file with @T.prim_func functions or an @I.ir_module"
    )
    parser.add_argument(
        "--gpu", default="H200", help="GPU model the tiling model sizes tiles for (A10G, A100, H100, H200)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tir-triton", description="TVM S-TIR -> verified Triton kernels")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True)

    passes = commands.add_parser("passes", help="run the pass pipeline, dump and diff every stage, print a table")
    _add_target(passes)
    passes.add_argument("--dump-dir", required=True, help="folder for NN_<Pass>.py dumps and .diff files")
    passes.add_argument(
        "--verify", action="store_true", help="verify every stage (well-formed, round trip, purity, bounds, numerics)"
    )
    passes.add_argument("--disable", action="append", default=[], metavar="PASS", help="skip a pass (repeatable)")
    passes.add_argument("--stop-after", metavar="PASS", help="stop after this pass")
    passes.add_argument("--quiet", action="store_true", help="print the table only, not the diffs")
    passes.add_argument("--deterministic", action="store_true", help="the pipeline of compile --deterministic")

    diff = commands.add_parser("diff", help="print the diffs between stages of a dump folder")
    diff.add_argument("dump_dir")
    diff.add_argument(
        "stages", nargs="*", metavar="STAGE", help="two stages (number or pass name); default: every consecutive pair"
    )

    commands.add_parser("list-passes", help="list the default pipeline's passes in order")

    compile_ = commands.add_parser("compile", help="compile to a standalone Triton module plus manifest.json")
    _add_target(compile_)
    compile_.add_argument("-o", "--out-dir", required=True)
    compile_.add_argument("--dump-dir", help="also write the stage dumps and the tile program here")
    compile_.add_argument("--no-verify", action="store_true", help="skip the per-pass verification")
    compile_.add_argument(
        "--check", action="store_true", help="run the kernel (Triton interpreter) against TVM's CPU build"
    )
    compile_.add_argument(
        "--float32-matmul-precision",
        choices=("highest", "high", "medium"),
        help="how tl.dots with fp32 operands compute, as torch.set_float32_matmul_precision: "
        "highest = IEEE fp32, high = TF32, medium = bf16 operands (default: PyTorch's setting)",
    )
    compile_.add_argument(
        "--allow-tf32", action="store_true", help="the old spelling of --float32-matmul-precision high"
    )
    compile_.add_argument(
        "--backend",
        choices=sorted(REGISTERED),
        default="triton",
        help="gluon: a thread-bound schedule with shared staging to a Gluon module (GPU only)",
    )
    compile_.add_argument(
        "--deterministic",
        action="store_true",
        help="pin every reduction order: the same bits for any batch, config and GPU schedule (docs/determinism.md)",
    )

    grad = commands.add_parser(
        "grad",
        help="differentiate (tir_passes.differentiate) and compile the forward and "
        "its backward: both modules, the backward's TVMScript, and the folder's manifest "
        "(docs/autodiff.md)",
    )
    _add_target(grad)
    grad.add_argument("--wrt", required=True, metavar="A,B", help="the parameters to differentiate, comma-separated")
    grad.add_argument("-o", "--out-dir", required=True)
    grad.add_argument("--dump-dir", help="also write the stage dumps here (the backward's in DUMP_DIR/backward)")
    grad.add_argument("--no-verify", action="store_true", help="skip the per-pass verification")
    grad.add_argument("--save", metavar="auto|A,B",
                      help="forward intermediates a training forward saves for the backward instead of it "
                      "recomputing them: auto (the cost rule) or names (docs/autodiff.md)")

    verify = commands.add_parser(
        "verify", help="compile with every check, run the kernel against TVM, and compile it for sm_90/sm_80"
    )
    _add_target(verify)

    report = commands.add_parser("report", help="compile with every check and write one self-contained HTML report")
    _add_target(report)
    report.add_argument("-o", "--out", required=True, metavar="REPORT.html", help="the page to write")
    report.add_argument(
        "--results",
        metavar="FILE.json",
        help="GPU benchmark results (benchmarks/run_gpu.py's JSON) "
        "to place the kernel under the roofline; the entry named after the PrimFunc is used",
    )
    report.add_argument("--result", metavar="NAME", help="the entry of --results to use, when its name differs")

    banks = commands.add_parser("bank-conflicts", help="shared-memory bank-conflict report of a CUDA-style schedule")
    banks.add_argument(
        "target", metavar="FILE.py[:FUNC]", help="a file with an S-TIR PrimFunc or IRModule with thread bindings"
    )
    banks.add_argument("--fix", action="store_true", help="also report after BankConflictFreeTiling")

    model = commands.add_parser(
        "model",
        help="the hardware model's prediction per kernel (compiled ahead of time "
        "for the GPU, no GPU needed): default config and the best of the tuner's space; "
        "of a TVMScript program, or of a module tir-triton wrote (then without TVM)",
    )
    _add_target(model)
    model.add_argument("--sizes", default="", help="symbolic sizes, e.g. rows=4096")
    model.add_argument("--top", type=int, default=3, help="configs of the tuner's space to show besides the default")

    tune = commands.add_parser(
        "tune",
        help="tune generated modules on the GPU (random inputs) and write the choice "
        "into each module and its manifest (docs/tuning.md)",
    )
    tune.add_argument("modules", nargs="+", metavar="MODULE", help="modules written by `tir-triton compile`")
    tune.add_argument("--sizes", default="", help="symbolic sizes, e.g. rows=4096")
    tune.add_argument("--budget", type=int, default=25, help="timed evaluations of the search (default 25)")
    tune.add_argument("--seed", type=int, default=0, help="seed of the search's cost model")
    tune.add_argument("--max-space", type=int, default=64, help="configs per kernel the model keeps (default 64)")
    tune.add_argument("--no-cache", action="store_true", help="tune again even when the cache has a result")
    tune.add_argument("--no-write", action="store_true", help="do not write the choice into the modules")
    tune.add_argument(
        "--gpus",
        default="auto",
        help="GPUs to spread modules over: auto (all), a count, or ids like 0,2 (one worker process per GPU)",
    )
    tune.add_argument("--json-out", metavar="FILE.json", help="also write the reports here")
    tune.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _load(args):
    """(module, name, passes): the target's PrimFunc and the passes it still needs (a stage dump,
    `NN_Pass.py`, needs only the passes after its own; anything else the whole default pipeline)."""
    from tir_passes.infra import dump
    from tir_passes.infra.frontend import load_target, split_target
    from tir_passes.pipeline import default_pipeline, passes_after

    mod, name = load_target(args.target)
    stage = dump.stage_of(split_target(args.target)[0])
    passes = default_pipeline(args.gpu, getattr(args, "deterministic", False))
    return mod, name, passes_after(passes, stage[1]) if stage else passes


def cmd_passes(args) -> int:
    from tir_passes.pipeline import CHECKS, run_pipeline

    mod, name, passes = _load(args)
    checks = CHECKS if args.verify else ()
    result = run_pipeline(
        mod, passes, dump_dir=args.dump_dir, checks=checks, disable=args.disable, stop_after=args.stop_after
    )
    if not args.quiet:
        for stage in result.stages:
            print(stage.summary())
    print(f"PrimFunc {name}: {len(result.stages)} passes, dumps in {args.dump_dir}")
    for note in result.notes:
        print(f"note: {note}")
    print(result.table(), end="")
    return 0


def cmd_diff(args) -> int:
    from tir_passes.infra import dump

    stages = dump.list_stages(args.dump_dir)
    if args.stages:
        if len(args.stages) != 2:
            from tir_passes.errors import FrontendError

            raise FrontendError("diff takes a dump folder and either no stages or exactly two")
        pairs = [(dump.find_stage(stages, args.stages[0]), dump.find_stage(stages, args.stages[1]))]
    else:
        pairs = list(zip(stages, stages[1:]))
    for before, after in pairs:
        print(dump.pair_text(before, after))
    return 0


def cmd_list_passes(args) -> int:
    from tir_passes.pass_order import default_pass_names  # the order alone: no TVM

    for index, name in enumerate(default_pass_names(), start=1):
        print(f"{index:02d} {name}")
    return 0


def cmd_compile(args) -> int:
    from triton_codegen import check_against_tvm, compile

    mod, name, passes = _load(args)
    kernel = compile(
        mod,
        dump_dir=args.dump_dir,
        verify=not args.no_verify,
        gpu=args.gpu,
        float32_matmul_precision=args.float32_matmul_precision,
        allow_tf32=args.allow_tf32 or None,
        backend=args.backend,
        passes=passes if args.backend == "triton" else None,
        deterministic=args.deterministic,
    )
    os.makedirs(args.out_dir, exist_ok=True)
    path = kernel.save(args.out_dir)
    manifest = kernel.write_manifest(os.path.join(args.out_dir, "manifest.json"), os.path.basename(path))
    print(f"wrote {path} ({len(kernel.program.kernels)} kernel(s)) and {manifest}")
    for advice in kernel.advice:
        print(f"advice: {advice}")
    if args.check:  # compile() ran the kernel check unless --no-verify
        report = kernel.check_report or check_against_tvm(kernel, mod)
        print(report)
        return 0 if report.ok else 1
    return 0


def cmd_verify(args) -> int:
    from triton_codegen import compile
    from triton_codegen.aot import compile_ahead_of_time
    from triton_codegen.configs import config_space

    mod, name, passes = _load(args)
    kernel = compile(mod, verify=True, gpu=args.gpu, passes=passes)  # every check, the kernel against TVM last
    print(kernel.pipeline.table(), end="")
    report = kernel.check_report
    print(report)
    for tile_kernel in kernel.program.kernels:
        for arch in (90, 80):
            result = compile_ahead_of_time(kernel.module_file(), tile_kernel, config_space(tile_kernel)[0], arch)
            print(f"{tile_kernel.name}: compiles for sm_{arch} (shared memory {result.shared_bytes} bytes)")
    return 0 if report.ok else 1


def cmd_report(args) -> int:
    from triton_codegen.report import build_report, write_report

    report = build_report(args.target, gpu=args.gpu, results=args.results, result_name=args.result)
    path = write_report(report, args.out)
    stages = len(report.kernel.pipeline.stages)
    print(f"wrote {path} ({report.kernel.name}: {stages} stages, {len(report.kernel.program.kernels)} kernel(s))")
    print(report.kernel.check_report)  # the kernel against TVM, as the page's card says
    print(report.benchmark.note)
    return 0


def cmd_bank_conflicts(args) -> int:
    from tir_passes.passes.bank_conflict_free_tiling import BankConflictFreeTiling
    from tir_passes.analyses.bank_conflicts import analyze, format_report
    from tir_passes.infra.frontend import load_target

    mod, name = load_target(args.target)
    print(f"== {name}\n{format_report(analyze(mod))}")
    if args.fix:
        fixed = BankConflictFreeTiling()(mod)
        print(f"== {name} after BankConflictFreeTiling\n{format_report(analyze(fixed))}")
    return 0


def cmd_model(args) -> int:
    from triton_codegen.loader import is_generated_module
    from triton_codegen.model_report import format_rows, model_rows, saved_model_rows

    sizes = _sizes(args.sizes)
    if is_generated_module(args.target):   # a saved module: its TILE_SUMMARY is enough, no TVM
        rows = saved_model_rows(args.target, args.gpu, sizes, args.top)
    else:
        from triton_codegen import compile

        mod, name, passes = _load(args)
        rows = model_rows(compile(mod, verify=False, gpu=args.gpu, passes=passes), args.gpu, sizes, args.top)
    print(format_rows(rows, args.gpu, sizes), end="")
    return 0


def _sizes(text: str) -> dict[str, int]:
    """`rows=4096,cols=8`: each size variable's value."""
    items = [item.split("=") for item in text.split(",") if item]
    if any(len(item) != 2 or not item[0].strip().isidentifier() or not item[1].strip().isdigit() for item in items):
        from tir_passes.errors import FrontendError

        raise FrontendError(f"--sizes takes NAME=N pairs separated by commas (rows=4096,cols=8), not {text!r}")
    return {name.strip(): int(value) for name, value in items}


def cmd_tune(args) -> int:
    from triton_codegen.tuning import tune_module, tune_modules

    sizes = _sizes(args.sizes)
    gpus = _gpu_ids(args.gpus) if len(args.modules) > 1 else [0]
    if len(gpus) > 1:
        options = [f"--sizes={args.sizes}", f"--budget={args.budget}", f"--seed={args.seed}",
                   f"--max-space={args.max_space}", "--quiet"] + ["--no-cache"] * args.no_cache \
            + ["--no-write"] * args.no_write
        reports = tune_modules(args.modules, gpus, options)
    else:
        reports = [
            tune_module(
                path,
                sizes,
                budget=args.budget,
                seed=args.seed,
                use_cache=not args.no_cache,
                write=not args.no_write,
                progress=not args.quiet,
                max_space=args.max_space,
            )
            for path in args.modules
        ]
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump(reports, handle, indent=2, default=str)
    print(json.dumps(reports, indent=2, default=str))
    return 0


def _gpu_ids(text: str) -> list[int]:
    """`auto`: every GPU; `N`: the first N; `0,2`: those."""
    if text == "auto":
        import torch

        return list(range(max(1, torch.cuda.device_count())))
    if "," in text:
        return [int(gpu) for gpu in text.split(",") if gpu]
    return list(range(int(text)))


COMMANDS = {
    "passes": cmd_passes,
    "diff": cmd_diff,
    "list-passes": cmd_list_passes,
    "compile": cmd_compile,
    "grad": cmd_grad,
    "verify": cmd_verify,
    "report": cmd_report,
    "model": cmd_model,
    "tune": cmd_tune,
    "bank-conflicts": cmd_bank_conflicts,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    default_fp_fusion()
    try:
        from tir_passes.errors import TirTritonError
    except ImportError as err:  # a broken installation: say so plainly
        print(f"error: cannot import tir-triton ({err})", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command](args)
    except TirTritonError as err:
        if args.debug:
            traceback.print_exc()
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - last resort: one paragraph, traceback on --debug
        if args.debug:
            traceback.print_exc()
        print(
            f"internal error: {type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}\n"
            "(this is a tir-triton bug; run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
