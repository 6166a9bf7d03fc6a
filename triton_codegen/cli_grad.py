"""`tir-triton grad FILE[:FUNC] --wrt A,B -o OUT`: the forward, its backward (tir_passes.differentiate) and, with
`--save`, the training forward that saves what the backward reads, written beside each other with the backward
as differentiate wrote it and one manifest for the folder (docs/autodiff.md). Imports no TVM until it runs.
"""

from __future__ import annotations

import os


def cmd_grad(args) -> int:
    from tir_passes.infra.frontend import load_target
    from triton_codegen import compile

    mod, name = load_target(args.target)
    wrt = [item.strip() for item in args.wrt.split(",") if item.strip()]
    save = args.save if args.save in (None, "auto") else [item.strip() for item in args.save.split(",") if item.strip()]
    kernel = compile(mod, dump_dir=args.dump_dir, verify=not args.no_verify, gpu=args.gpu, wrt=wrt, save=save)
    os.makedirs(args.out_dir, exist_ok=True)
    path = kernel.save(args.out_dir)
    backward = kernel.backward
    backward_path = os.path.join(args.out_dir, kernel.backward_link.module)
    tir_path = os.path.join(args.out_dir, f"{backward.name}_tir.py")
    with open(tir_path, "w") as handle:
        handle.write(backward.pipeline.input_module["main"].script())  # as differentiate wrote it
    manifest = os.path.join(args.out_dir, "manifest.json")  # one per folder, both modules in it
    kernel.write_manifest(manifest)
    backward.write_manifest(manifest, kernel.backward_link.module)
    training = ""
    if kernel.training is not None:
        kernel.training.write_manifest(manifest, kernel.backward_link.training)
        saved = ", ".join(kernel.backward_link.saved)
        training = (f", {os.path.join(args.out_dir, kernel.backward_link.training)} (the training forward, "
                    f"{len(kernel.training.program.kernels)} kernel(s), saving {saved})")
    grads = ", ".join(f"{d} = d{name}/d{x}" for d, x in kernel.backward_link.grads)
    print(
        f"wrote {path} ({len(kernel.program.kernels)} kernel(s)), {backward_path} "
        f"({len(backward.program.kernels)} kernel(s): {grads}){training}, {tir_path} and {manifest}"
    )
    return 0
