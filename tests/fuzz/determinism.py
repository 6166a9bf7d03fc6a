"""The determinism fuzzer mode: compile(deterministic=True) keeps its promise on random programs.

For each drawn program: the contract check finds every pin the promise needs (determinism.py),
the emitted module has no atomics, and every config of the module's config list (each kernel's
configs in turn, the others at their default) gives the same output bits on the same inputs as
the default config. `python -m tests.fuzz --deterministic` runs it on any seed range; CI runs a
fixed range in tests/fuzz/test_determinism_fuzz.py. `config_differences` and `outputs_bits` are
what tests/triton_codegen/test_determinism.py compares examples with.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager

import numpy as np

from tir_passes.errors import UnsupportedConstructError

# the families whose programs reduce (the others hold no reduction order to pin)
FAMILIES = ("reduction", "matmul", "reduce_broadcast", "scan", "chain")


@contextmanager
def dots_summed_along_k():
    """The interpreter's tl.dot is numpy's matmul, whose BLAS picks its summation order by the
    operands' shapes and threads (OpenBLAS differs across machines: 33 and 300 rows of one GEMM
    gave other bits on one CPU, not on another). The GPU's MMA adds a tile's products in an order
    fixed by K alone (proved on the H200, docs/determinism.md); so, inside this, each 2-D tile
    product is its exact products summed in order along K, whatever its M and N, and what a bit
    comparison sees is what the kernels decide: the K tile and the order of the K steps."""
    from triton.runtime.interpreter import TensorHandle, interpreter_builder

    original = interpreter_builder.create_dot

    def create_dot(a, b, d, input_precision, max_num_imprecise_acc):
        if a.data.ndim != 2:
            return original(a, b, d, input_precision, max_num_imprecise_acc)
        wide = d.data.dtype
        products = a.data.astype(wide)[:, :, None] * b.data.astype(wide)[None, :, :]
        return TensorHandle(np.add.reduce(products, axis=1) + d.data, d.dtype.scalar)

    interpreter_builder.create_dot = create_dot
    try:
        yield
    finally:
        interpreter_builder.create_dot = original


def fresh_arguments(func, sizes: dict[str, int] | None, seed: int = 0) -> tuple[dict[str, np.ndarray], dict]:
    """Seeded inputs of the program's declared shapes (and its scalars), as the kernel check makes them."""
    from tir_passes.checks.numerics import make_inputs, scalar_arguments, specialize_shapes

    concrete = specialize_shapes(func, sizes)
    return make_inputs(concrete, seed), scalar_arguments(func, sizes)


def outputs_bits(kernel, func, data: dict[str, np.ndarray], scalars: dict, chosen: dict[str, int] | None = None) \
        -> dict[str, bytes]:
    """Run `kernel` (in the interpreter) on fresh copies of `data`, with `chosen` config indices;
    the bytes of every buffer it writes."""
    from triton_codegen import loader
    from triton_codegen.check import to_torch

    module = kernel.module(interpret=True)
    saved = dict(module.CHOSEN)
    module.CHOSEN.update(chosen or {})
    tensors = {name: to_torch(array) for name, array in data.items()}
    args = [tensors[p.name] if p.name in tensors else scalars[p.name] for p in func.params]
    try:
        with loader.triton_mode(True):
            module.run(*args)
    finally:
        module.CHOSEN.clear()
        module.CHOSEN.update(saved)
    written = [p.name for p in kernel.program.params if p.written]
    return {name: tensors[name].contiguous().view(-1).view(_bytes_dtype(tensors[name])).numpy().tobytes()
            for name in written}


def _bytes_dtype(tensor):
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]


def config_differences(kernel, func, sizes: dict[str, int] | None = None, seed: int = 0) -> list[str]:
    """Configs of the module whose outputs differ, bit for bit, from the default config's."""
    data, scalars = fresh_arguments(func, sizes, seed)
    baseline = outputs_bits(kernel, func, data, scalars)
    module = kernel.module(interpret=True)
    differences = []
    for name, configs in module.CONFIGS.items():
        for index, config in enumerate(configs):
            if index == module.CHOSEN[name]:
                continue
            got = outputs_bits(kernel, func, data, scalars, {name: index})
            changed = [buffer for buffer in baseline if got[buffer] != baseline[buffer]]
            if changed:
                differences.append(f"{name} config {config}: {', '.join(changed)} differ")
    return differences


def check_deterministic(func, sizes: dict[str, int] | None = None) -> list[str]:
    """Problems with the promise on one program: contract, atomics, configs ([] when it holds)."""
    from tir_passes.checks.verify_contract import check_contract
    from triton_codegen import compile

    kernel = compile(func, deterministic=True, verify=False)
    problems = check_contract(kernel.tir)
    if not kernel.program.deterministic:
        problems.append("the program does not carry the deterministic promise")
    if "atomic_" in kernel.source:
        problems.append("the module uses atomics")
    return problems + config_differences(kernel, func, sizes)


def run_deterministic(seeds, family: str | None = None) -> tuple[int, int, list[tuple[int, str]]]:
    """(checked, refused, failures) over the seeds' programs (of `family`, else of FAMILIES in turn)."""
    from tests.fuzz.generator import generate
    from tests.fuzz.runner import load_program, write_program

    checked, refused, failures = 0, 0, []
    with tempfile.TemporaryDirectory(prefix="tir-triton-determinism-") as folder, dots_summed_along_k():
        for seed in seeds:
            program = generate(seed, family or FAMILIES[seed % len(FAMILIES)])
            func = load_program(write_program(program, folder))
            try:
                problems = check_deterministic(func, program.sizes)
            except UnsupportedConstructError:
                refused += 1
                continue
            except Exception as err:  # noqa: BLE001  an internal error is a failure too, with the seed
                problems = [f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"]
            checked += 1
            failures += [(seed, p) for p in problems]
    return checked, refused, failures
