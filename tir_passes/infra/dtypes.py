"""Facts about TVM dtype strings that the TVM-free side needs too (the descriptor plan of a saved
module, the hardware model): no TVM here."""

import re

_BITS = re.compile(r"^(?:bool|[a-z]+?(\d+)(?:_[a-z0-9]+)?)(?:x\d+)?$")


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
