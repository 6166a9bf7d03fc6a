"""Run a PrimFunc on the CPU (TVM's `llvm` build) on seeded random data, and compare results.

This is the reference every stage and every generated kernel is checked against: the input
PrimFunc, built by TVM itself. Symbolic shape variables are bound to small odd sizes first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from tir_passes.checks.accumulation import WidenedEntry, widen_accumulators
from tir_passes.checks.data_ranges import value_ranges
from tir_passes.checks.rounded_operands import rounded_buffers
from tir_passes.checks.tolerances import TOLERANCES, loosest, magnitude, tolerance_for  # noqa: F401 (TOLERANCES: re-exported)
from tir_passes.checks.sandbox import Crash, run_isolated
from tir_passes.errors import UndefinedBehaviourError, UnsupportedConstructError
from tir_passes.analyses.nest import vars_of
from tir_passes.checks.shape_reduction import ReducedCopy, reduced_copy

# small odd sizes for symbolic shape variables, taken in parameter order
SYMBOLIC_SIZES = (37, 19, 23, 29, 31, 13, 11, 7)

def buffer_params(func: tirx.PrimFunc) -> list:
    return [p for p in func.params if tirx.is_buffer_var(p)]


def shape_vars(func: tirx.PrimFunc) -> list[tirx.Var]:
    """Symbolic variables in buffer shapes, in order of first appearance."""
    seen: list[tirx.Var] = []
    for buf in buffer_params(func):
        for dim in buf.shape:
            for var in vars_of(dim):
                if not any(var.same_as(s) for s in seen):
                    seen.append(var)
    return seen


def serialize_threads(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Thread-bound loops made serial, so a CUDA-style schedule builds for the CPU. By TIR's
    semantics the iterations of a thread-bound loop are independent, so the result is the same;
    shared-scope buffers build as ordinary memory on the CPU."""

    def serial(loop: tirx.For) -> tirx.For:
        if loop.kind != tirx.ForKind.THREAD_BINDING:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body, None, loop.annotations)

    body = tvm_ffi.structural_map(func.body, (tirx.For, serial))
    return func if body.same_as(func.body) else func.with_body(body)


def symbolic_sizes(func: tirx.PrimFunc, sizes: dict[str, int] | None = None) -> dict[str, int]:
    """The size each symbolic shape variable is bound to: the one given, else a small odd default."""
    return {var.name: (sizes or {}).get(var.name, SYMBOLIC_SIZES[index % len(SYMBOLIC_SIZES)])
            for index, var in enumerate(shape_vars(func))}


def specialize_shapes(func: tirx.PrimFunc, sizes: dict[str, int] | None = None) -> tirx.PrimFunc:
    """Bind every symbolic shape variable (by name) to a concrete size (and serialize threads)."""
    func = serialize_threads(func)
    chosen = symbolic_sizes(func, sizes)
    bindings = {var: tirx.const(chosen[var.name], var.ty.dtype) for var in shape_vars(func)}
    scalar_shape_params = [p for p in func.params if not tirx.is_buffer_var(p) and p in bindings]
    mapping = {p: bindings[p] for p in scalar_shape_params}
    mapping.update({buf: _specialized_buffer(buf, bindings) for buf in buffer_params(func) if _vars_in_shape(buf)})
    return func.specialize(mapping) if mapping else func


def _vars_in_shape(buf) -> bool:
    return any(vars_of(dim) for dim in buf.shape)


def _specialized_buffer(buf, bindings):
    # a derived dimension (n * 2) stays as it is: specialize substitutes it from the variables'
    # bindings, and refuses a new value for anything but a whole variable
    shape = [bindings.get(d, d) if isinstance(d, tirx.Var) else d for d in buf.shape]
    return tirx.decl_buffer(shape, buf.dtype, buf.name, layout=None)


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a TIR dtype; bfloat16 is ml_dtypes', which TVM's tensors accept."""
    return np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)


def random_array(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype.startswith("float") or dtype == "bfloat16":
        return rng.standard_normal(shape).astype(numpy_dtype(dtype))
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("uint"):
        return rng.integers(0, 16, shape).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-8, 9, shape).astype(dtype)
    raise UnsupportedConstructError(f"no random data generator for dtype {dtype}")


def static_shape(buf) -> tuple[int, ...]:
    dims = []
    for dim in buf.shape:
        if not isinstance(dim, tirx.IntImm):
            raise UnsupportedConstructError(f"buffer {buf.name} still has a symbolic dimension {dim}")
        dims.append(int(dim.value))
    return tuple(dims)


def make_inputs(func: tirx.PrimFunc, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random contents for every buffer parameter (outputs too: some accumulate); integer
    ones inside the values the program allows (checks/data_ranges.py)."""
    _check_distinct_names(func)
    rng = np.random.default_rng(seed)
    arrays = {buf.name: random_array(static_shape(buf), str(buf.dtype), rng) for buf in buffer_params(func)}
    return arrays | integer_data(func, rng)


def integer_data(func: tirx.PrimFunc, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Contents for the integer buffer parameters the program narrows: inside every index they
    compute and every `T.assume` about them, no zero where they divide. TVM's llvm build checks
    neither an index nor a divisor: other values would read outside a table or trap."""
    ranges = value_ranges(func)
    arrays = {}
    for buf in buffer_params(func):
        if buf.name not in ranges:
            continue
        value_range, dtype = ranges[buf.name], str(buf.dtype)
        low, high = value_range.bounds(dtype)
        if low >= high:
            continue  # nothing satisfies the program: its reference run says so, if it matters
        values = rng.integers(low, high, static_shape(buf), dtype=np.int64)
        if value_range.nonzero:
            values = _without_zeros(values, low, high, rng)
        arrays[buf.name] = values.astype(dtype)
    return arrays


def _without_zeros(values: np.ndarray, low: int, high: int, rng: np.random.Generator) -> np.ndarray:
    choices = [v for v in range(max(low, -8), min(high, 9)) if v != 0] or [v for v in (low, high - 1) if v != 0]
    if not choices:
        return values
    zeros = values == 0
    values[zeros] = rng.choice(choices, int(zeros.sum()))
    return values


def index_ranges(func: tirx.PrimFunc) -> dict[str, tuple[int, int]]:
    """Buffer parameter -> [low, high) its data are drawn from, for each integer parameter an index
    or a `T.assume` narrows (the all-negative data set keeps these values)."""
    ranges = value_ranges(func)
    params = {buf.name: str(buf.dtype) for buf in buffer_params(func)}
    return {name: r.bounds(params[name]) for name, r in ranges.items() if r.constrained}


def _check_distinct_names(func: tirx.PrimFunc) -> None:
    """Data sets, kernels and launchers know parameters by name: two of one name cannot be told apart."""
    seen: dict[str, int] = {}
    for index, param in enumerate(func.params):
        if param.name in seen:
            raise UnsupportedConstructError(
                f"parameters #{seen[param.name]} and #{index} of the PrimFunc are both named '{param.name}' "
                "(te.placeholder's default name?); give every parameter its own name")
        seen[param.name] = index


def negative_inputs(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same data made strictly negative: catches wrong identities (max initialised with 0)."""
    negative = {}
    for name, array in inputs.items():
        if array.dtype == bool or array.dtype.kind == "u":
            negative[name] = array
        else:
            negative[name] = (-(np.abs(array)) - array.dtype.type(1)).astype(array.dtype)
    return negative


def scalar_arguments(func: tirx.PrimFunc, sizes: dict[str, int] | None = None) -> dict[str, object]:
    """Values for non-buffer parameters: shape variables by their bound size, others fixed."""
    values: dict[str, object] = {}
    bound = symbolic_sizes(func, sizes)
    for param in func.params:
        if tirx.is_buffer_var(param):
            continue
        dtype = param.ty.dtype
        if param.name in bound:
            values[param.name] = bound[param.name]
        elif dtype == "bool":
            values[param.name] = True
        elif dtype.startswith("float"):
            values[param.name] = 0.75
        else:
            values[param.name] = 3
    return values


def build_llvm(func: tirx.PrimFunc):
    """TVM's CPU build of a PrimFunc with static shapes, min and max propagating NaN, reductions into
    16-bit floats accumulating in fp32 as the kernels' do (checks/accumulation.py)."""
    wide, widened = widen_accumulators(propagate_nan(func))
    entry = tvm.compile(tvm.IRModule({"main": wide}), target="llvm")["main"]
    return WidenedEntry(entry, func, widened) if widened else entry


def _isnan(expr):
    # NOTE: TVM's llvm build has no isnan for bfloat16; a widened value is NaN exactly when it was
    return tirx.isnan(tirx.Cast("float32", expr) if expr.ty.dtype == "bfloat16" else expr)


def propagate_nan(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Float `min`/`max` that return NaN when either operand is NaN, as torch.minimum/maximum (and
    the kernels) do. TVM's llvm build selects `a < b ? a : b`, which keeps a NaN only in the second
    place; a max reduction then drops NaNs that come before the last element."""

    def rewrite(node):
        if not node.ty.dtype.startswith(("float", "bfloat")):
            return node
        nan = tirx.const(float("nan"), node.ty.dtype)
        return tirx.Select(tirx.Or(_isnan(node.a), _isnan(node.b)), nan, node)

    body = tvm_ffi.structural_map(func.body, [(tirx.Max, rewrite), (tirx.Min, rewrite)])
    return func if body.same_as(func.body) else func.with_body(body)


def run_built(entry, func: tirx.PrimFunc, arrays: dict[str, np.ndarray], scalars: dict[str, object] | None = None) -> dict[str, np.ndarray]:  # noqa: E501
    """Run a built function on copies of `arrays`; return every buffer afterwards."""
    tensors, args = {}, []
    for param in func.params:
        if tirx.is_buffer_var(param):
            tensors[param.name] = tvm.runtime.tensor(np.array(arrays[param.name], copy=True), tvm.cpu(0))
            args.append(tensors[param.name])
        else:
            args.append((scalars or {})[param.name])
    entry(*args)
    return {name: tensor.numpy() for name, tensor in tensors.items()}


def compare_arrays(
    name: str,
    expected: np.ndarray,
    actual: np.ndarray,
    dtype: str,
    scale: float = 1.0,
    tolerance_dtype: str | None = None,
    atol_scale: float = 1.0,
) -> str | None:
    """None when equal within the dtype's tolerance (or `tolerance_dtype`'s: an fp32 result of a
    tf32 or bf16 tl.dot; its atol times `atol_scale`), else a one-paragraph description."""
    if expected.shape != actual.shape:
        return f"{name}: shape {actual.shape} != expected {expected.shape}"
    if not (dtype.startswith("float") or dtype == "bfloat16"):
        bad = np.argwhere(expected != actual)
        if len(bad):
            idx = tuple(int(i) for i in bad[0])
            return f"{name}: {len(bad)} of {expected.size} elements differ (bit-exact dtype {dtype}); first at {idx}: got {actual[idx]}, expected {expected[idx]}"  # noqa: E501
        return None
    exp64, act64 = expected.astype("float64"), actual.astype("float64")
    nan_exp, nan_act = np.isnan(exp64), np.isnan(act64)
    if (nan_exp != nan_act).any():
        idx = tuple(int(i) for i in np.argwhere(nan_exp != nan_act)[0])
        return f"{name}: NaN positions differ; first at {idx}: got {actual[idx]}, expected {expected[idx]}"
    inf_exp, inf_act = np.isinf(exp64), np.isinf(act64)
    if (inf_exp != inf_act).any() or (exp64[inf_exp] != act64[inf_act]).any():
        return f"{name}: Inf positions or signs differ"
    finite = ~(nan_exp | inf_exp)
    tol = tolerance_for(tolerance_dtype or dtype, scale)
    diff = np.abs(exp64 - act64)
    limit = tol.atol * atol_scale + tol.rtol * np.abs(exp64)
    bad = np.argwhere(finite & (diff > limit))
    if len(bad):
        idx = tuple(int(i) for i in bad[0])
        return (
            f"{name}: {len(bad)} of {expected.size} elements differ beyond rtol={tol.rtol} atol={tol.atol}; "
            f"first at {idx}: got {actual[idx]}, expected {expected[idx]} (max abs diff {diff[finite].max():.3g})"
        )
    return None


@dataclass
class ReferenceRun:
    """The input PrimFunc's CPU results on seeded data sets (random, then all negative), reused
    for every stage and for the generated kernels."""

    func: tirx.PrimFunc
    concrete: tirx.PrimFunc
    datasets: list[dict[str, np.ndarray]]
    scalars: dict[str, object]
    outputs: list[dict[str, np.ndarray]]
    # {output: the narrower float type its value was rounded to on the way}: compared at that type's
    # tolerance (checks/rounded_operands.py)
    rounded: dict[str, str] = field(default_factory=dict)

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        return self.datasets[0]

    @classmethod
    def of(cls, func: tirx.PrimFunc, seed: int = 0, sizes: dict[str, int] | None = None) -> "ReferenceRun":
        concrete = specialize_shapes(func, sizes)
        first = make_inputs(concrete, seed)
        # data an index or an assumption narrows stay as drawn in both sets (made negative, an id
        # would index outside its table)
        datasets = [first, negative_inputs(first) | {name: first[name] for name in index_ranges(concrete)}]
        scalars = scalar_arguments(func, sizes)
        entry = build_llvm(concrete)
        outputs = run_sets(entry, concrete, datasets, _scalars_for(concrete, scalars))
        if isinstance(outputs, SetCrash):
            raise UndefinedBehaviourError(_undefined_behaviour(func, outputs, seed))
        return cls(func, concrete, datasets, scalars, outputs, rounded_buffers(concrete))

    def mismatches(
        self, results: list[dict[str, np.ndarray]], scale: float = 1.0, checked_as: dict[str, str] | None = None
    ) -> list[str]:
        """Problems of `results` against the outputs; `checked_as` maps an output dtype to the dtype
        whose tolerance it is compared at (fp32 outputs of reduced-precision dots). An output computed
        from operands the program rounds to a narrower type is compared at that type's (`rounded`)."""
        dtypes = {b.name: str(b.dtype) for b in buffer_params(self.concrete)}
        problems = []
        for label, expected_set, actual_set in zip(DATA_SET_LABELS, self.outputs, results):
            for name in sorted(expected_set):
                problem = compare_arrays(
                    name,
                    expected_set[name],
                    actual_set[name],
                    dtypes[name],
                    scale,
                    loosest([dtypes[name], (checked_as or {}).get(dtypes[name]), self.rounded.get(name)]),
                    magnitude(expected_set[name]) if name in self.rounded else 1.0,
                )
                if problem:
                    problems.append(f"{label}: {problem}")
        return problems


def _scalars_for(func: tirx.PrimFunc, scalars: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in scalars.items() if any(p.name == k for p in func.params)}


class StageCrashed(RuntimeError):
    """A later stage crashed or hung on data on which the input ran (the pass's fault)."""


def stage_results(
    reference: ReferenceRun, stage: tirx.PrimFunc, sizes: dict[str, int] | None = None
) -> list[dict[str, np.ndarray]]:
    """Run a later stage of the same function on the reference's data sets."""
    concrete = specialize_shapes(stage, sizes)
    entry = build_llvm(concrete)
    results = run_sets(entry, concrete, reference.datasets, _scalars_for(concrete, reference.scalars))
    if isinstance(results, SetCrash):
        raise StageCrashed(f"the stage {results.crash.describe()} on the {results.label}, on which the input runs")
    return results


DATA_SET_LABELS = ("random data", "all-negative data")


@dataclass(frozen=True)
class SetCrash:
    """Which data set a built function crashed (or hung) on, and how."""

    label: str
    crash: Crash


def run_sets(
    entry, func: tirx.PrimFunc, datasets: list[dict[str, np.ndarray]], scalars: dict[str, object]
) -> list[dict[str, np.ndarray]] | SetCrash:
    """Every data set through a built function, in one forked child (checks/sandbox.py); after a
    crash, each set alone, to name the one that crashes."""
    results = run_isolated(lambda: [run_built(entry, func, data, scalars) for data in datasets])
    if not isinstance(results, Crash):
        return results
    for label, data in zip(DATA_SET_LABELS, datasets):
        alone = run_isolated(lambda data=data: run_built(entry, func, data, scalars))
        if isinstance(alone, Crash):
            return SetCrash(label, alone)
    return SetCrash("data sets run together", results)


def _undefined_behaviour(func: tirx.PrimFunc, crashed: SetCrash, seed: int) -> str:
    name = func.attrs.get("global_symbol") if func.attrs is not None else None
    return (
        f"PrimFunc {name or 'main'}: TVM's llvm build of the input itself {crashed.crash.describe()} on the "
        f"numerics check's {crashed.label} (seed {seed}): the program has undefined behaviour on that data, so "
        "there is no reference to check the passes and the kernel against. The data respect every T.assume about "
        "loaded values, every index linear in one loaded value, and keep divisors loaded from memory nonzero "
        "(docs/verification.md); state the program's ranges with T.assume, or compile with verify=False"
    )


def progress(items, what: str, enabled: bool = True):
    """`items`, with a progress bar on a terminal while long CPU work runs (tqdm)."""
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=what, unit=what.split()[-1], leave=False, disable=None)


@dataclass
class NumericsPlan:
    """Where the numerics check runs: on the program itself, or on a copy with its large sizes
    reduced (shape_reduction.py) that the same passes compile, so a 16384 x 8192 program is
    checked in seconds. The copy must take the full-size program's decisions (run_pipeline
    compares the plans, checks/decision_plan.py, and moves to a larger copy when they differ).
    The dump and the report say which (`describe`)."""

    input_module: tvm.IRModule  # what the stages' numerics start from: the input or its reduced copy
    reference: ReferenceRun
    copy: "ReducedCopy"
    large: bool  # above the size checked as it is
    full_module: tvm.IRModule | None = None  # the input itself
    final_module: tvm.IRModule | None = None  # the reduced copy's last stage (the kernel check compiles it)
    plan_note: str = ""  # whether the copy decides as the full-size program does

    @property
    def reduced(self) -> bool:
        return self.copy.func is not None or self.copy.reason == "no size is reduced"

    def describe(self) -> str:
        where = self.copy.describe()
        return f"{where}: {self.plan_note}" if self.plan_note else where

    def switch_to(self, copy: "ReducedCopy", note: str) -> None:
        """Check at `copy` instead (a larger copy whose decisions are the full size's)."""
        func = copy.func if copy.func is not None else self.full_module["main"]
        self.copy, self.input_module, self.plan_note = copy, tvm.IRModule({"main": func}), note
        self.reference = ReferenceRun.of(func)

    @classmethod
    def of(cls, mod: tvm.IRModule) -> "NumericsPlan":
        copy = reduced_copy(mod["main"])
        module = tvm.IRModule({"main": copy.func}) if copy.func is not None else mod
        large = copy.reason not in ("small enough",)
        return cls(module, ReferenceRun.of(module["main"]), copy, large, mod)
