"""Generate the interpreter-against-GPU bit check of compile(deterministic=True) (issue 20), here with TVM:

    PYTHONPATH=$PWD python benchmarks/interp_bits_generate.py generated/interp_bits   # then, on the GPU machine:
    python3 benchmarks/interp_bits_gpu.py generated/interp_bits OUT/interp_bits.json

Each program (examples, a few probes of single ops, fuzzed programs of tests/fuzz/generator.py) is
compiled with the flag (one example also without it), and triton_codegen/interpreter_exact.py
decides from its TileProgram whether the interpreter can reproduce the GPU's bits. The module,
its seeded inputs (tir_passes/checks/numerics.make_inputs, at small odd shapes) and the outputs
Triton's interpreter computes from them go into the folder (git-ignored), with one plan.json entry
per program: its parameters in call order, the buffers it writes, the decision and its reasons.
Expressible programs must come back equal from the GPU; the others are controls (reported only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)
os.environ.setdefault("TRITON_INTERPRET", "1")   # the outputs are the interpreter's: set before triton is imported

import numpy as np

FUZZ_FAMILIES = ("elementwise", "integer", "transpose", "conditional", "reduction", "chain", "scan")


def example_cases() -> list[tuple[str, object, bool]]:
    """(name, PrimFunc, deterministic): the examples in and outside the class, at small odd shapes."""
    from argmax import make_argmax
    from cumsum import make_cumsum
    from elementwise import make_scale_shift_relu
    from layernorm import make_layernorm
    from matmul import make_matmul
    from max_pool2d import make_max_pool2d
    from quantize_int8 import make_quantize_int8
    from rmsnorm import make_rmsnorm
    from softmax import make_softmax
    from transpose import make_transpose

    return [
        ("scale_shift_relu_fp32", make_scale_shift_relu(13, 29), True),
        ("scale_shift_relu_fp16", make_scale_shift_relu(13, 29, "float16"), True),
        ("scale_shift_relu_fp32_free", make_scale_shift_relu(13, 29), False),   # may contract into an fma
        ("transpose_fp32", make_transpose(13, 29), True),
        ("max_pool2d_fp32", make_max_pool2d(2, 3, 11, 9), True),
        ("argmax_fp32", make_argmax(13, 29), True),
        ("quantize_int8_fp16", make_quantize_int8(13, 29), True),   # a division
        ("rmsnorm_fp32", make_rmsnorm(29), True),
        ("layernorm_fp32", make_layernorm(13, 29), True),
        ("softmax_fp32", make_softmax(13, 29), True),
        ("matmul_fp16", make_matmul(13, 29, 33, "float16"), True),
        ("cumsum_fp32", make_cumsum(13, 29), True),
    ]


def probe_cases() -> list[tuple[str, object, bool]]:
    """One op each, where the table of interpreter_exact.py draws its line."""
    return [
        ("divide_fp32", make_binary("divide", "float32"), True),
        ("divide_fp64", make_binary("divide", "float64"), True),
        ("sqrt_fp32", make_unary("sqrt", "float32"), True),
        ("sqrt_fp64", make_unary("sqrt", "float64"), True),
        ("floor_fp32", make_unary("floor", "float32"), True),
        ("exp_fp32", make_unary("exp", "float32"), True),
        ("multiply_add_bf16", make_binary("multiply_add", "bfloat16"), True),
        ("multiply_add_fp16", make_binary("multiply_add", "float16"), True),
    ]


def make_unary(op: str, dtype: str):
    """Y = op(|X| + 1), the argument in every op's domain."""
    from tvm.script import tirx as T

    function = {"sqrt": T.sqrt, "floor": T.floor, "exp": T.exp}[op]

    @T.prim_func(s_tir=True)
    def unary(X: T.Buffer((13, 29), dtype), Y: T.Buffer((13, 29), dtype)):
        for i, j in T.grid(13, 29):
            with T.sblock("unary"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = function(T.abs(X[vi, vj]) + T.Cast(dtype, 1))

    return unary


def make_binary(op: str, dtype: str):
    """Z = X / (|Y| + 1), or Z = X * Y + X."""
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def divide(X: T.Buffer((13, 29), dtype), Y: T.Buffer((13, 29), dtype), Z: T.Buffer((13, 29), dtype)):
        for i, j in T.grid(13, 29):
            with T.sblock("divide"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = X[vi, vj] / (T.abs(Y[vi, vj]) + T.Cast(dtype, 1))

    @T.prim_func(s_tir=True)
    def multiply_add(X: T.Buffer((13, 29), dtype), Y: T.Buffer((13, 29), dtype), Z: T.Buffer((13, 29), dtype)):
        for i, j in T.grid(13, 29):
            with T.sblock("multiply_add"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = X[vi, vj] * Y[vi, vj] + X[vi, vj]

    return {"divide": divide, "multiply_add": multiply_add}[op]


def fuzz_cases(seeds: range, folder: str) -> list[tuple[str, object, bool, dict]]:
    from tests.fuzz.generator import generate
    from tests.fuzz.runner import load_program, write_program

    cases = []
    for seed in seeds:
        program = generate(seed, FUZZ_FAMILIES[seed % len(FUZZ_FAMILIES)])
        path = write_program(program, os.path.join(folder, "tir"))
        cases.append((f"fuzz_{seed}_{program.family}", load_program(path), True, program.sizes))
    return cases


def _storable(array: np.ndarray) -> np.ndarray:
    """bfloat16 as float32 (exact), which np.load reads without ml_dtypes; the GPU side casts back."""
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def interpreter_outputs(kernel, func, data: dict[str, np.ndarray], scalars: dict) -> dict[str, np.ndarray]:
    """Every buffer the kernel writes, after one run in Triton's interpreter on copies of `data`."""
    from triton_codegen import loader
    from triton_codegen.check import to_numpy, to_torch

    tensors = {name: to_torch(array) for name, array in data.items()}
    args = [tensors[p.name] if p.name in tensors else scalars[p.name] for p in func.params]
    with loader.triton_mode(True):
        kernel.module(interpret=True).run(*args)
    return {p.name: to_numpy(tensors[p.name]) for p in kernel.program.params if p.written}


def prepare(name: str, func, deterministic: bool, sizes: dict, folder: str, seed: int) -> dict:
    from tests.fuzz.determinism import fresh_arguments
    from triton_codegen import compile
    from triton_codegen.interpreter_exact import interpreter_exactness

    kernel = compile(func, verify=False, deterministic=deterministic)
    decision = interpreter_exactness(kernel.program)
    data, scalars = fresh_arguments(func, sizes or None, seed)
    outputs = interpreter_outputs(kernel, func, data, scalars)
    module = os.path.basename(kernel.save(os.path.join(folder, f"{name}.py")))
    arrays = {f"in__{k}": _storable(v) for k, v in data.items()}
    arrays |= {f"out__{k}": _storable(v) for k, v in outputs.items()}
    np.savez_compressed(os.path.join(folder, f"{name}.npz"), **arrays)
    specs = {spec.name: spec for spec in kernel.program.params}
    params = [{"name": p.name, "kind": "scalar", "value": scalars[p.name]} if p.name in scalars
              else {"name": p.name, "kind": "buffer", "dtype": specs[p.name].dtype} for p in func.params]
    return {"name": name, "module": module, "data": f"{name}.npz", "deterministic": deterministic,
            "params": params, "written": sorted(outputs), "expressible": decision.exact,
            "reasons": list(decision.reasons)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--fuzz", type=int, default=42, help="fuzzed programs, seeds 0..N-1 (families in turn)")
    parser.add_argument("--only", nargs="*", help="only these cases, by name (tests)")
    parser.add_argument("--seed", type=int, default=0, help="the inputs' seed")
    args = parser.parse_args(argv)
    from tir_passes.errors import UnsupportedConstructError

    os.makedirs(args.folder, exist_ok=True)
    cases = [(n, f, d, {}) for n, f, d in example_cases() + probe_cases()] + fuzz_cases(range(args.fuzz), args.folder)
    entries, skipped = [], []
    for name, func, deterministic, sizes in cases:
        if args.only is not None and name not in args.only:
            continue
        try:
            entry = prepare(name, func, deterministic, sizes, args.folder, args.seed)
        except UnsupportedConstructError as err:   # a fuzzed program the compiler refuses: nothing to compare
            skipped.append({"name": name, "why": str(err).splitlines()[0][:300]})
            continue
        entries.append(entry)
        print(f"{name}: {'expressible' if entry['expressible'] else 'control'}"
              + ("" if entry["expressible"] else f" ({entry['reasons'][0]})"), flush=True)
    with open(os.path.join(args.folder, "plan.json"), "w") as handle:
        json.dump({"cases": entries, "skipped": skipped}, handle, indent=1)
    print(f"{len(entries)} programs ({sum(e['expressible'] for e in entries)} expressible) in {args.folder}, "
          f"{len(skipped)} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
