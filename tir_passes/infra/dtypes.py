"""The dtypes, once: each one's bits, Triton's names for it and the float limits the passes and the
code generators need, in one table (DTYPES), plus facts about any TVM dtype string. TVM-free: the
descriptor plan of a saved module, the hardware model, the ahead-of-time compile and the emitters
read it too. (The runtime support every saved module carries, triton_codegen/runtime_support.py,
keeps its own torch table: a saved module imports nothing of tir-triton.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BITS = re.compile(r"^(?:bool|[a-z]+?(\d+)(?:_[a-z0-9]+)?)(?:x\d+)?$")


@dataclass(frozen=True)
class Dtype:
    bits: int
    signature: str                   # Triton's name in a kernel signature (`*fp16` for a pointer)
    language: str                    # Triton's (and Gluon's) language attribute: tl.<language>
    float_max: float | None = None   # the largest finite value (floats)
    smallest_normal: float | None = None


DTYPES = {
    "bool": Dtype(1, "i1", "int1"),
    "int8": Dtype(8, "i8", "int8"),
    "int16": Dtype(16, "i16", "int16"),
    "int32": Dtype(32, "i32", "int32"),
    "int64": Dtype(64, "i64", "int64"),
    "uint8": Dtype(8, "u8", "uint8"),
    "uint16": Dtype(16, "u16", "uint16"),
    "uint32": Dtype(32, "u32", "uint32"),
    "uint64": Dtype(64, "u64", "uint64"),
    "float16": Dtype(16, "fp16", "float16", 65504.0, 2.0**-14),
    "bfloat16": Dtype(16, "bf16", "bfloat16", 3.3895313892515355e38, 2.0**-126),
    "float32": Dtype(32, "fp32", "float32", 3.4028234663852886e38, 2.0**-126),
    "float64": Dtype(64, "fp64", "float64", 1.7976931348623157e308, 2.0**-1022),
}
FLOATS = tuple(name for name, dtype in DTYPES.items() if dtype.float_max is not None)


def dtype_bits(dtype) -> int:
    """Bits of one element of `dtype` ("float16" 16, "bfloat16" 16, "float8_e4m3fn" 8, "bool" 1)."""
    text = str(dtype)
    match = _BITS.match(text)
    if match is None:
        raise ValueError(f"not a scalar dtype: {text!r}")
    return 1 if match.group(1) is None else int(match.group(1))


def element_bytes(dtype) -> int:
    """Bytes of one element (bool and sub-byte types count as one byte)."""
    return max(1, dtype_bits(dtype) // 8)


def float_max(dtype) -> float | None:
    """The largest finite value of a float dtype (None: not a float of the table)."""
    known = DTYPES.get(str(dtype))
    return known.float_max if known is not None else None


def language_names(prefix: str) -> dict[str, str]:
    """{dtype: `prefix.<name>`} of every dtype in the table ("tl" for Triton, "gl" for Gluon)."""
    return {name: f"{prefix}.{dtype.language}" for name, dtype in DTYPES.items()}


def pointer_types() -> dict[str, str]:
    """{dtype: Triton's pointer type in a signature} (`*fp16`)."""
    return {name: f"*{dtype.signature}" for name, dtype in DTYPES.items()}
