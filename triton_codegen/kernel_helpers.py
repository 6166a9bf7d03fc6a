"""The @triton.jit helpers and module constants a generated kernel may call or read, by name: the
combine functions of tl.reduce / tl.associative_scan, NaN-propagating max/min reductions, and
the dot-operand upcast of the interpreter. The emitter collects the names a kernel uses; the
module writes each once (helpers before the kernels, constants after them)."""

from __future__ import annotations

from lowering.rewrites.sums_together import MAX_SUM_AXES, MAX_SUMS   # the sums reduced together

# reductions through tl.reduce and a combine function of HELPERS (products), and the HELPERS of float
# max/min reductions that propagate NaN (with the combine each calls)
COMBINED_REDUCTIONS = {"prod": "_tir_multiply"}
NAN_REDUCTIONS = {"nan_max": ("_tir_nan_max", "_tir_maximum", "_NUMPY_REDUCTIONS"),
                   "nan_min": ("_tir_nan_min", "_tir_minimum", "_NUMPY_REDUCTIONS")}
# module constants the helpers read (written after the kernels: a @triton.jit function reads its globals
# when it is compiled or, in the interpreter, called; the module opens with its kernels)
CONSTANTS = {
    "_NUMPY_REDUCTIONS": '_NUMPY_REDUCTIONS = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")\n',
    "_UPCAST_DOT_OPERANDS": '_UPCAST_DOT_OPERANDS = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")\n',
}


def _nan_reduction(kind: str) -> str:
    """A NaN-propagating reduction: on the GPU tl.reduce with the NaN-propagating combine (one pass,
    max.NaN); in Triton's interpreter, whose custom-combine reduce is a Python call per element, its
    own numpy reduction and a second one finding NaN."""
    return (f"@triton.jit\ndef _tir_nan_{kind}(x, axis: tl.constexpr):\n"
            "    if _NUMPY_REDUCTIONS:\n"
            "        has_nan = tl.max((x != x).to(tl.int8), axis=axis) > 0\n"
            f'        return tl.where(has_nan, float("nan"), tl.{kind}(x, axis=axis))\n'
            f"    return tl.reduce(x, axis, _tir_{'maximum' if kind == 'max' else 'minimum'})\n")


# combine functions that tl.reduce / tl.associative_scan take, written once into a module that uses them;
# max and min propagate NaN, as BINARY_RULES do
HELPERS = {
    "_tir_maximum": "@triton.jit\ndef _tir_maximum(a, b):\n    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)\n",  # noqa: E501
    "_tir_minimum": "@triton.jit\ndef _tir_minimum(a, b):\n    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)\n",  # noqa: E501
    "_tir_multiply": "@triton.jit\ndef _tir_multiply(a, b):\n    return a * b\n",
    "_tir_nan_max": _nan_reduction("max"),
    "_tir_nan_min": _nan_reduction("min"),
    # Triton's interpreter (3.9) computes tl.dot on bfloat16 operands from their raw bits (garbage);
    # there the operands go in fp32, which holds every bfloat16 product exactly (the kernels come
    # before the runtime's _INTERPRETED in the module: the helper reads the environment itself)
    "_dot_operand": (
        "@triton.jit\ndef _dot_operand(x):\n"
        "    if _UPCAST_DOT_OPERANDS:\n        return x.to(tl.float32)\n    return x\n"
    ),
}


def _sums(count: int, axis: int) -> str:
    """`count` sums along `axis` as one reduction of the tuple (SumsCombine: one shared-memory round trip for
    all, each sum in tl.sum's order, so the same bits); in the interpreter, whose custom-combine reduce is a
    Python call per element, numpy's sums."""
    args = ", ".join(f"x{i}" for i in range(count))
    sums = ", ".join(f"tl.sum(x{i}, axis={axis})" for i in range(count))
    return (f"@triton.jit\ndef _tir_sums{count}_{axis}({args}):\n    if _NUMPY_REDUCTIONS:\n        return {sums}\n"
            f"    return tl.reduce(({args}), {axis}, _tir_add{count})\n")


def _add(count: int) -> str:
    a, b = [f"a{i}" for i in range(count)], [f"b{i}" for i in range(count)]
    sums = ", ".join(f"{x} + {y}" for x, y in zip(a, b))
    return f"@triton.jit\ndef _tir_add{count}({', '.join(a + b)}):\n    return {sums}\n"


HELPERS.update({f"_tir_sums{n}_{axis}": _sums(n, axis) for n in range(2, MAX_SUMS + 1) for axis in range(MAX_SUM_AXES)})
HELPERS.update({f"_tir_add{n}": _add(n) for n in range(2, MAX_SUMS + 1)})
