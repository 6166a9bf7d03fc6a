"""The tolerance a numerics check compares an output at: per dtype (`TOLERANCES`), the loosest of the types
that bound its precision (its own, a reduced-precision dot's, a narrower type its operands were rounded to:
checks/rounded_operands.py), and the scale of a rounded value's absolute error (`magnitude`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOLERANCES = {  # (rtol, atol) per dtype of a compared output
    "float64": (1e-9, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (3e-2, 3e-2),
}


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


def loosest(dtypes) -> str:
    """The dtype of the widest tolerance among `dtypes` (None entries skipped)."""
    return max((d for d in dtypes if d is not None), key=lambda d: TOLERANCES.get(d, (0.0, 0.0)))


def tolerance_for(dtype: str, scale: float = 1.0) -> Tolerance:
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    return Tolerance(rtol * scale, atol * scale)


def magnitude(values: np.ndarray) -> float:
    """The scale of a buffer's values (at least 1): the absolute tolerance of a value computed from rounded
    operands is relative to it. A rounded operand is off by a unit of the narrow type relative to its own
    size, and a sum of such terms keeps that absolute error where the terms cancel; the buffer's largest
    element is the size of its terms that the comparison can see (checks/rounded_operands.py)."""
    wide = values.astype("float64")
    finite = wide[np.isfinite(wide)]
    return max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
