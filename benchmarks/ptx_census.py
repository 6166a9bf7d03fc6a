"""Which tensor-core, conversion, shared-memory and exp2 instructions a generated module's kernels compile to, on the CPU.

    python benchmarks/ptx_census.py generated/suite/attention_fp32_high_b4h32s4096d128.py [--arch 90 80]

Each kernel is compiled ahead of time (triton_codegen/aot.py, no GPU) at its default config for each
architecture; the PTX's `wgmma`, `mma.sync`, `cvt`, shared-memory (`ld`/`st.shared`, `ldmatrix`/`stmatrix`)
and `ex2` instructions are counted by kind (static counts: an instruction in a loop counts once). This is how
docs/tuning.md says that Triton's TF32 dots convert nothing (no `cvt.rna.tf32`): the hardware model's
conversion term for them counts work the kernel does not do.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from triton_codegen.aot import SavedKernel, compile_ahead_of_time  # noqa: E402
from triton_codegen.loader import import_module  # noqa: E402

COUNTED = re.compile(r"\b(wgmma\.mma_async\S*|mma\.sync\S*|cvt\.\S+|(?:ld|st)\.shared\S*|[ls]tmatrix\S*|ex2\S*)")


def census(path: str, arch: int) -> dict[str, dict[str, int]]:
    module = import_module(path, interpret=True)
    found = {}
    for name, summary in module.TILE_SUMMARY.items():
        config = module.CONFIGS[name][module.CHOSEN[name]]
        ptx = compile_ahead_of_time(path, SavedKernel.of(name, summary), config, arch, listings=True).ptx
        found[name] = dict(sorted(collections.Counter(COUNTED.findall(ptx)).items()))
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module")
    parser.add_argument("--arch", type=int, nargs="+", default=[90, 80])
    options = parser.parse_args(argv)
    for arch in options.arch:
        for kernel, counts in census(options.module, arch).items():
            print(f"sm_{arch} {kernel}: " + ", ".join(f"{name} {count}" for name, count in counts.items()))


if __name__ == "__main__":
    main()
