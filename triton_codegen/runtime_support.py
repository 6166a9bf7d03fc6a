"""Launch-time support copied verbatim into every generated module (between the markers below),
so a saved module needs only torch and triton. Everything here takes plain data: the generated
code describes its parameters as tuples and calls these functions.

A parameter is (name, kind, dtype, shape, written, int32_offsets); a shape entry is an int, a
shape variable's name, or a derived dimension: a tuple (op, a, b) of entries that shape_value
evaluates (lowering/rules/param_shapes.py makes them). Nothing here evaluates text.

What a launch accepts (every refusal is a LaunchError naming the parameter):
- arguments by position or by the PrimFunc's parameter names; a missing, extra or repeated one
  is refused with the signature, `run(A, B, n)`;
- tensors of the parameter's dtype, rank and shape, all on one device, of the kind the kernels
  run on (the CPU under TRITON_INTERPRET=1, else CUDA, which must exist); an output that requires
  grad is refused: kernels write outputs in place, outside autograd, so no gradient could flow
  through them (pass `out.detach()` or a tensor without requires_grad; inputs that require grad
  are read as plain data);
- scalars: a bool parameter takes a bool; an integer parameter an int (Python or numpy) within
  its dtype's range (an int32 given 2**40 + 3 is refused, not wrapped to 3; 2.5 is refused, not
  truncated); a float parameter an int or a float within its dtype's finite range (inf and nan
  pass). Kernel signatures declare each scalar's dtype, and a kernel casts on entry a scalar whose
  dtype Triton's interpreter would not infer from the Python number (int64 given 3, float64).
A kernel whose grid is empty (a zero-size dimension, a loop of extent 0) is not launched; a grid
beyond CUDA's 2**31 - 1 programs is refused.

The checks read only each argument's metadata (address, dtype, device, shape, strides,
requires_grad; a number's type, value and sign), so a call whose arguments have the metadata of
one that passed before reuses that result (the 64 most recently added; metadata only, no tensor
is kept alive), and the choice between a kernel's variants likewise: checking took 68 us a call
on an H200 host, more than a 40 us kernel. Fake tensors, tensor subclasses and other values are
checked on every call; a call that fails is never remembered.

A kernel with a `_tma` variant (triton_codegen/descriptors.py) runs it when USE_DESCRIPTORS is set
and TMA can describe every tensor it takes a descriptor of: compute capability 9.0 or more (any
in Triton's interpreter, which runs descriptors too), last stride 1, the other strides and the
base address multiples of 16 bytes, positive strides, every dimension in [1, 2**31), a block row
of at least 16 bytes, and a direct launch (the PyTorch op's wrap_triton gets the pointer kernel).
Otherwise, or when the variant does not fit the GPU (shared memory), the pointer kernel runs.
VARIANTS_RUN says, per kernel, which variant its last launch ran and why.
"""

import math
import numbers
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
_MAX_PROGRAMS = 2**31 - 1  # CUDA's limit on grid x, the one axis the launchers use
_INT_RANGES = {f"{sign}int{bits}": ((0, 2**bits) if sign else (-2 ** (bits - 1), 2 ** (bits - 1)))
               for sign in ("", "u") for bits in (8, 16, 32, 64)}
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
              "float64": 1.7976931348623157e308}
# read when this module is imported, the moment @triton.jit also reads it
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


class LaunchError(ValueError):
    """The arguments do not match the compiled PrimFunc; the message names the parameter."""


def _expected_device_type():
    if _INTERPRETED:
        return "cpu"
    if not torch.cuda.is_available():
        raise LaunchError("no CUDA device: set TRITON_INTERPRET=1 before importing triton to run the kernels on the "
                          "CPU in Triton's interpreter")
    return "cuda"


def bind_arguments(params, args, kwargs):
    """The arguments in parameter order, from positions and parameter names."""
    names = [param[0] for param in params]
    signature = f"run({', '.join(names)})"
    if len(args) > len(names):
        raise LaunchError(f"{signature} takes {len(names)} arguments, got {len(args)}")
    values = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names:
            raise LaunchError(f"{signature} has no parameter '{name}'")
        if name in values:
            raise LaunchError(f"{signature} got two values for parameter '{name}'")
        values[name] = value
    missing = [name for name in names if name not in values]
    if missing:
        raise LaunchError(f"{signature} is missing {', '.join(missing)}")
    return [values[name] for name in names]


def _check_scalar(name, dtype, value):
    """`value` as the plain Python number the kernel gets, if it fits the parameter's dtype."""
    given = f"parameter {name} ({dtype}) got {value!r}"
    if _is_numpy_bool(value):
        value = bool(value)
    if isinstance(value, torch.Tensor) or not isinstance(value, numbers.Number):
        raise LaunchError(f"parameter {name}: expected a Python number, got {type(value).__name__}")
    if dtype == "bool":
        if not isinstance(value, bool):
            raise LaunchError(f"{given}; expected a bool")
        return bool(value)
    if dtype in _INT_RANGES:
        if not isinstance(value, numbers.Integral):
            raise LaunchError(f"{given}; expected an int (it would be truncated)")
        low, high = _INT_RANGES[dtype]
        if not low <= value < high:
            raise LaunchError(f"{given}, outside the range of {dtype} [{low}, {high - 1}] (it would wrap)")
        return int(value)
    if not isinstance(value, numbers.Real):
        raise LaunchError(f"{given}; expected a real number")
    if math.isfinite(value) and abs(value) > _FLOAT_MAX[dtype]:
        raise LaunchError(f"{given}, beyond the largest finite {dtype} ({_FLOAT_MAX[dtype]:g})")
    return float(value)


def _is_numpy_bool(value):
    """numpy's bool scalar (np.bool_), which is not a numbers.Number."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")


def _check_tensor(name, dtype, value):
    if not isinstance(value, torch.Tensor):
        raise LaunchError(f"parameter {name}: expected a torch.Tensor, got {type(value).__name__}")
    if value.dtype != _TORCH_DTYPES.get(dtype):
        raise LaunchError(f"parameter {name}: expected dtype {dtype}, got {str(value.dtype).replace('torch.', '')}")
    # a fake tensor (torch.compile tracing the op) needs no GPU present, only the GPU's device type
    wanted = "cuda" if not _INTERPRETED and _fake(value) else _expected_device_type()
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
                raise LaunchError(f"parameter {name}: dimension {axis} is {actual}, expected {shape_text(entry)} = {wanted}")  # noqa: E501


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


def _check_one_device(params, args):
    placed = [(param[0], value.device) for param, value in zip(params, args) if isinstance(value, torch.Tensor)]
    if len({device for _, device in placed}) > 1:
        where = ", ".join(f"{name} on {device}" for name, device in placed)
        raise LaunchError(f"arguments on different devices: {where}")


_REMEMBERED = 64  # argument signatures whose checks passed, kept per cache (the 64 most recently added)


def _metadata(value):
    """What the checks read of an argument, or None when it must be checked every call."""
    if type(value) is torch.Tensor:
        return (value.data_ptr(), value.dtype, value.device, value.shape, value.stride(), value.requires_grad)
    if type(value) in (int, bool):
        return (type(value), value)
    if type(value) is float:  # -0.0 == 0.0, but a kernel may tell them apart (1 / x)
        return (float, value, math.copysign(1.0, value))
    return None


def _argument_key(*parts):
    """A key of plain metadata, or None when some argument has none (see _metadata)."""
    key = tuple(parts)
    return None if None in key else key


def _remember(cache, key, value):
    """`value`, kept under `key` (unless None) among the cache's last _REMEMBERED."""
    if key is not None:
        if len(cache) >= _REMEMBERED:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value


_CHECKED = {}  # (params, interpreted?, arguments' metadata) -> (scalars as the kernel takes them, shape sizes)


def check_arguments(params, args, kwargs=None, size_dtypes=None):
    """Check every argument against its parameter; return (values by name, shape sizes). A size
    bound from a dimension must fit its dtype in the kernels (`size_dtypes`: name -> dtype)."""
    args = bind_arguments(params, args, kwargs or {})
    key = _argument_key(id(params), _INTERPRETED, *(_metadata(value) for value in args))
    known = _CHECKED.get(key) if key is not None else None
    if known is not None:
        scalars, sizes = known
        return {param[0]: scalars.get(param[0], value) for param, value in zip(params, args)}, dict(sizes)
    values, sizes = _check_all(params, args)
    _check_size_ranges(sizes, size_dtypes or {})
    scalars = {param[0]: values[param[0]] for param in params if param[1] == "scalar"}
    _remember(_CHECKED, key, (scalars, dict(sizes)))
    return values, sizes


def _check_size_ranges(sizes, size_dtypes):
    """A dimension of 2**32 + 7 for an int32 size would reach the kernel as 7 (Triton truncates
    it) while the grid was sized with the exact value: refused, as a scalar out of range is."""
    for name, dtype in size_dtypes.items():
        if name in sizes and dtype in _INT_RANGES:
            low, high = _INT_RANGES[dtype]
            if not low <= sizes[name] < high:
                raise LaunchError(
                    f"shape variable {name} ({dtype}) is {sizes[name]}, outside the range of {dtype} "
                    f"[{low}, {high - 1}]: the kernels take it as {dtype} (it would wrap)"
                )


def _check_all(params, args):
    _check_one_device(params, args)
    sizes, origin, values = {}, {}, {}
    for (name, kind, dtype, shape, written, narrow), value in zip(params, args):
        if kind == "scalar":
            values[name] = _check_scalar(name, dtype, value)
            continue
        _check_tensor(name, dtype, value)
        if written and value.requires_grad:
            raise LaunchError(
                f"parameter {name}: output tensor requires grad; kernels write outputs in place "
                f"outside autograd, so no gradient would flow: pass {name}.detach() or a tensor "
                "without requires_grad"
            )
        if value.dim() != len(shape):
            raise LaunchError(
                f"parameter {name}: expected {len(shape)} dimensions, got {value.dim()} (shape {tuple(value.shape)})"
            )
        for axis, expected in enumerate(shape):
            _bind_dimension(name, axis, expected, value.shape[axis], sizes, origin)
        if narrow and _span(value) > _INT32_MAX:
            raise LaunchError(
                f"parameter {name}: its strides address more than 2**31 elements; this kernel uses 32-bit offsets"
            )
        values[name] = value
    for name, kind, _dtype, _shape, _w, _n in params:
        if kind == "scalar" and name in sizes and values[name] != sizes[name]:
            raise LaunchError(
                f"parameter {name} = {values[name]}, but {origin[name]} = {sizes[name]} (inconsistent symbolic sizes)"
            )
        if kind == "scalar" and name not in sizes:
            sizes[name] = values[name]
    _check_derived_dimensions(params, values, sizes)
    _check_aliasing(params, values)
    return values, sizes


def check_grid(kernel, programs):
    if programs > _MAX_PROGRAMS:
        raise LaunchError(f"kernel {kernel} needs {programs} programs, more than CUDA's grid limit of {_MAX_PROGRAMS}")


_CHECKED_CONFIGS = set()  # (kernel, config items) that passed check_config


def check_config(kernel, config, summary, pins=None):
    """Refuse a config (CONFIGS[kernel][CHOSEN[kernel]], which a reader may edit) that breaks what
    the kernel was compiled to assume; checked once per kernel and config."""
    key = (kernel, tuple(config.items()))
    if key in _CHECKED_CONFIGS:
        return
    problem = config_assumption_problem(summary, config, pins)
    if problem:
        raise LaunchError(f"CONFIGS[{kernel!r}] entry {config}: {problem}")
    _CHECKED_CONFIGS.add(key)


def config_assumption_problem(summary, config, pins=None):
    """Why `config` would make the kernel of this tile summary wrong or uncompilable, or "": a block
    size that is not a power of two (tl.arange), below the axis's minimum (a whole-axis tile, or
    tl.dot's 16), or that does not divide a static extent whose tail mask was dropped; num_warps
    not a power of two up to 32; num_stages below 1; a pinned setting of a deterministic kernel
    changed (pins: {setting: value or (value, why)})."""
    for dim in (summary or {}).get("dims", ()):
        size = config.get(dim["block"])
        if isinstance(size, bool) or not isinstance(size, int):
            return f"{dim['block']} is {size!r}, not a block size"
        if size < 1 or size & (size - 1):
            return f"{dim['block']}={size} is not a power of two"
        if size < dim["min"]:
            return f"{dim['block']}={size} is below what axis {dim['axis']} needs ({dim['min']}: a whole-axis tile or tl.dot's minimum)"  # noqa: E501
        if dim["even"] and isinstance(dim["extent"], int) and dim["extent"] % size:
            return (f"{dim['block']}={size} does not divide the extent {dim['extent']} of axis {dim['axis']}, "
                    "which the kernel reads and writes without a mask")
    warps, stages = config.get("num_warps"), config.get("num_stages")
    if isinstance(warps, bool) or not isinstance(warps, int) or warps < 1 or warps & (warps - 1) or warps > 32:
        return f"num_warps={warps!r} is not a power of two up to 32"
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        return f"num_stages={stages!r} is not a positive integer"
    for name, pinned in (pins or {}).items():
        value = pinned[0] if isinstance(pinned, tuple) else pinned
        if config.get(name) != value:
            return f"it changes {name} to {config.get(name)!r}, which the deterministic kernel pins at {value} (docs/determinism.md)"  # noqa: E501
    return ""


def _check_aliasing(params, values):
    tensors = [(p[0], p[4]) for p in params if p[1] == "buffer"]
    for name, written in tensors:
        if written and _self_overlapping(values[name]):
            raise LaunchError(f"parameter {name}: output tensor has overlapping elements (e.g. an expanded view)")
    for i, (name, written) in enumerate(tensors):
        for other, other_written in tensors[i + 1 :]:
            if (written or other_written) and _overlaps(values[name], values[other]):
                out, inp = (name, other) if written else (other, name)
                raise LaunchError(
                    f"parameter {out}: output aliases parameter {inp} (they share memory); pass separate tensors"
                )


USE_DESCRIPTORS = True  # False: every kernel runs its pointer variant, as on sm_80
VARIANTS_RUN = {}  # kernel -> "descriptors", or "pointers: why", for its last launch
_TMA_ALIGNMENT = 16
_CAPABILITIES = {}


def launch_variant(kernel, pointers, descriptors, planned, t, config, grid, args, options, wrap, divided="pointers"):
    """Launch `descriptors` (a `_tma` variant) with a tensor descriptor per planned argument,
    {param: (buffer, block constexpr names, None for 1)}, where it can run, else `pointers`;
    `divided`: the variant when every tile divides its tensor (descriptors.DescriptorPlan)."""
    blocks = {
        param: (buffer, tuple(config[name] if name else 1 for name in names))
        for param, (buffer, names) in planned.items()
    }
    described = [(param, block, _metadata(t[buffer])) for param, (buffer, block) in blocks.items()]
    key = (
        None
        if any(meta is None for _, _, meta in described)
        else (kernel, USE_DESCRIPTORS, wrap is launch_directly, *described)  # noqa: F821 - torch_op_support's
    )
    problem = (
        _CHOSEN_VARIANT[key]
        if key in _CHOSEN_VARIANT
        else _remember(_CHOSEN_VARIANT, key, _descriptor_problem(t, blocks, wrap, divided))
    )
    if problem is None:
        from triton.runtime.errors import OutOfResources
        from triton.tools.tensor_descriptor import TensorDescriptor

        # built every call: a cached descriptor would keep its tensor alive
        arguments = {
            param: TensorDescriptor(t[buffer], list(t[buffer].shape), list(t[buffer].stride()), list(block))
            for param, (buffer, block) in blocks.items()
        }
        try:
            handle = wrap(descriptors)[grid](*args, **arguments, **options)
        except OutOfResources as err:
            problem = f"the descriptor variant does not fit this GPU ({err})"
        else:
            VARIANTS_RUN[kernel] = "descriptors"
            return handle
    VARIANTS_RUN[kernel] = f"pointers: {problem}"
    return wrap(pointers)[grid](*args, **options)


_CHOSEN_VARIANT = {}  # (kernel, switches, each descriptor's block and tensor metadata) -> why not descriptors, or None


def _descriptor_problem(t, blocks, wrap, divided="pointers"):
    """Why the descriptor variant cannot run with these tensors, or None."""
    if not USE_DESCRIPTORS:
        return "descriptors switched off (USE_DESCRIPTORS = False)"
    if wrap is not launch_directly:  # noqa: F821 - torch_op_support's, in the same generated module
        return "launched through a wrapper (torch.library.wrap_triton), which gets the pointer kernel"
    for buffer, block in blocks.values():
        problem = _capability_problem(t[buffer].device) or _layout_problem(buffer, t[buffer], block)
        if problem:
            return problem
    if divided == "pointers" and all(_tiles_divide(t[buffer], block) for buffer, block in blocks.values()):
        # the pointer kernel's accesses are then unmasked; which variant runs faster then is the
        # plan's decision (descriptors.py: measured on matmuls, transposes and attention)
        return "every tile divides its tensor: the pointer kernel needs no masks"
    return None


def _tiles_divide(tensor, block):
    return all(size % tile == 0 for size, tile in zip(tensor.shape, block))


def _capability_problem(device):
    if _INTERPRETED:
        return None
    if device.index not in _CAPABILITIES:
        _CAPABILITIES[device.index] = torch.cuda.get_device_capability(device)
    major, minor = _CAPABILITIES[device.index]
    return None if major >= 9 else f"sm_{major}{minor} has no TMA (sm_90 or newer)"


def _layout_problem(name, tensor, block):
    """Why TMA cannot describe `tensor` in blocks of `block`, or None."""
    size = tensor.element_size()
    if any(extent < 1 or extent > _INT32_MAX for extent in tensor.shape):
        return f"{name} has shape {tuple(tensor.shape)}: TMA needs every dimension in [1, 2**31)"
    if tensor.stride(-1) != 1:
        return f"{name} has last stride {tensor.stride(-1)}: TMA needs 1"
    for axis, stride in enumerate(tensor.stride()[:-1]):
        if stride <= 0 or stride * size % _TMA_ALIGNMENT:
            return f"{name}.stride({axis}) is {stride} elements ({stride * size} bytes): TMA needs a positive multiple of 16 bytes"  # noqa: E501
    if tensor.data_ptr() % _TMA_ALIGNMENT:
        return f"{name} starts at an address that is not a multiple of 16 bytes"
    if block[-1] * size < _TMA_ALIGNMENT:
        return f"{name}'s block rows are {block[-1] * size} bytes: TMA needs 16 or more"
    return None


# --- tir-triton runtime support: end ---
