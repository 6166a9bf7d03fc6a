"""Launch-time support copied verbatim into every generated module (between the markers below),
so a saved module needs only torch and triton. Everything here takes plain data: the generated
code describes its parameters as tuples and calls these functions.

A parameter is (name, kind, dtype, shape, written, int32_offsets); a shape entry is an int, a
shape variable's name, or a derived dimension: a tuple (op, a, b) of entries that shape_value
evaluates (lowering/param_shapes.py makes them). Nothing here evaluates text.
"""

import os

import torch

# --- tir-triton runtime support: begin ---
_TORCH_DTYPES = {
    "bool": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "uint16": getattr(torch, "uint16", None),
    "uint32": getattr(torch, "uint32", None), "uint64": getattr(torch, "uint64", None),
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64,
}
_INT32_MAX = 2**31 - 1
# read when this module is imported, the moment @triton.jit also reads it
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


class LaunchError(ValueError):
    """The arguments do not match the compiled PrimFunc; the message names the parameter."""


def _expected_device_type():
    return "cpu" if _INTERPRETED else "cuda"


def _check_tensor(name, dtype, value):
    if not isinstance(value, torch.Tensor):
        raise LaunchError(f"parameter {name}: expected a torch.Tensor, got {type(value).__name__}")
    if value.dtype != _TORCH_DTYPES.get(dtype):
        raise LaunchError(f"parameter {name}: expected dtype {dtype}, got {str(value.dtype).replace('torch.', '')}")
    wanted = _expected_device_type()
    if value.device.type != wanted:
        hint = " (set TRITON_INTERPRET=1 before importing triton to run on the CPU)" if wanted == "cuda" else ""
        raise LaunchError(f"parameter {name}: tensor is on {value.device}, but kernels run on {wanted}{hint}")


def _bind_dimension(name, axis, expected, actual, sizes, origin):
    if isinstance(expected, int):
        if actual != expected:
            raise LaunchError(f"parameter {name}: dimension {axis} is {actual}, expected {expected}")
    elif isinstance(expected, str):
        if expected in sizes and sizes[expected] != actual:
            raise LaunchError(f"parameter {name}: dimension {axis} is {actual}, but {expected} = {sizes[expected]} "
                              f"from {origin[expected]} (inconsistent symbolic sizes)")
        sizes.setdefault(expected, actual)
        origin.setdefault(expected, f"{name}.shape[{axis}]")


# Python's // and % round toward minus infinity, as TIR's floordiv and floormod do
_SHAPE_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "min": min, "max": max,
}


def shape_value(entry, sizes):
    """The size a shape entry stands for, given the sizes of the shape variables."""
    if isinstance(entry, int):
        return entry
    if isinstance(entry, str):
        return sizes[entry]
    op, a, b = entry
    return _SHAPE_OPS[op](shape_value(a, sizes), shape_value(b, sizes))


def shape_text(entry):
    if not isinstance(entry, tuple):
        return str(entry)
    op, a, b = entry
    if op in ("min", "max"):
        return f"{op}({shape_text(a)}, {shape_text(b)})"
    return f"{_operand_text(a)} {op} {_operand_text(b)}"


def _operand_text(entry):
    nested = isinstance(entry, tuple) and entry[0] not in ("min", "max")
    return f"({shape_text(entry)})" if nested else shape_text(entry)


def _check_derived_dimensions(params, values, sizes):
    for name, _kind, _dtype, shape, _written, _narrow in params:
        for axis, entry in enumerate(shape):
            if not isinstance(entry, tuple):
                continue
            actual = values[name].shape[axis]
            try:
                wanted = shape_value(entry, sizes)
            except ZeroDivisionError:
                bound = ", ".join(f"{var} = {size}" for var, size in sizes.items())
                raise LaunchError(f"parameter {name}: dimension {axis} is {shape_text(entry)}, which divides by zero "
                                  f"({bound})") from None
            if actual != wanted:
                raise LaunchError(f"parameter {name}: dimension {axis} is {actual}, expected {shape_text(entry)} = {wanted}")


def _span(tensor):
    """Elements between the first and one past the last addressed element."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride()))


def _overlaps(a, b):
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device or _fake(a) or _fake(b):
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    a1, b1 = a0 + _span(a) * a.element_size(), b0 + _span(b) * b.element_size()
    return a0 < b1 and b0 < a1


def _fake(tensor):
    """A fake tensor (the PyTorch op traced by torch.compile) has no memory: aliasing is checked on real ones."""
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(tensor)


def _self_overlapping(tensor):
    dims = sorted((abs(st), sz) for st, sz in zip(tensor.stride(), tensor.shape) if sz > 1)
    reach = 1
    for stride, size in dims:
        if stride < reach:
            return True
        reach = stride * size
    return False


def check_arguments(params, args):
    """Check every argument against its parameter; return (values by name, shape sizes)."""
    if len(args) != len(params):
        names = ", ".join(p[0] for p in params)
        raise LaunchError(f"expected {len(params)} arguments ({names}), got {len(args)}")
    sizes, origin, values = {}, {}, {}
    for (name, kind, dtype, shape, written, narrow), value in zip(params, args):
        if kind == "scalar":
            if isinstance(value, torch.Tensor) or not isinstance(value, (int, float)):
                raise LaunchError(f"parameter {name}: expected a Python number, got {type(value).__name__}")
            values[name] = value
            continue
        _check_tensor(name, dtype, value)
        if value.dim() != len(shape):
            raise LaunchError(f"parameter {name}: expected {len(shape)} dimensions, got {value.dim()} (shape {tuple(value.shape)})")
        for axis, expected in enumerate(shape):
            _bind_dimension(name, axis, expected, value.shape[axis], sizes, origin)
        if narrow and _span(value) > _INT32_MAX:
            raise LaunchError(f"parameter {name}: its strides address more than 2**31 elements; this kernel uses 32-bit offsets")
        values[name] = value
    for (name, kind, _dtype, _shape, _w, _n) in params:
        if kind == "scalar" and name in sizes and values[name] != sizes[name]:
            raise LaunchError(f"parameter {name} = {values[name]}, but {origin[name]} = {sizes[name]} (inconsistent symbolic sizes)")
        if kind == "scalar" and name not in sizes:
            sizes[name] = values[name]
    _check_derived_dimensions(params, values, sizes)
    _check_aliasing(params, values)
    devices = {v.device for v in values.values() if isinstance(v, torch.Tensor)}
    if len(devices) > 1:
        raise LaunchError(f"tensors are on several devices: {', '.join(sorted(str(d) for d in devices))}")
    return values, sizes


def _check_aliasing(params, values):
    tensors = [(p[0], p[4]) for p in params if p[1] == "buffer"]
    for name, written in tensors:
        if written and _self_overlapping(values[name]):
            raise LaunchError(f"parameter {name}: output tensor has overlapping elements (e.g. an expanded view)")
    for i, (name, written) in enumerate(tensors):
        for other, other_written in tensors[i + 1:]:
            if (written or other_written) and _overlaps(values[name], values[other]):
                out, inp = (name, other) if written else (other, name)
                raise LaunchError(f"parameter {out}: output aliases parameter {inp} (they share memory); "
                                  "pass separate tensors")


def benchmark_configs(launch, configs):
    """Time each config of one kernel with triton.testing.do_bench; return the best index."""
    from triton.testing import do_bench

    times = []
    for config in configs:
        try:
            launch(config)  # compile outside the timing: do_bench sizes its repeats on a first call
            torch.cuda.synchronize()
            times.append(do_bench(lambda: launch(config), warmup=10, rep=50, return_mode="median"))
        except Exception:  # a config the GPU rejects (too much shared memory) is skipped
            times.append(float("inf"))
    return min(range(len(configs)), key=lambda i: times[i]), times
# --- tir-triton runtime support: end ---
