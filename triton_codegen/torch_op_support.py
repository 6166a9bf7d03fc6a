"""PyTorch registration copied verbatim into every generated module (between the markers below),
after the runtime support whose checks it calls, so a saved module registers its op with torch and
triton only. The generated `as_torch_op(qualname)` passes its data: PARAMS, OUTPUTS (the parameters
the program writes without reading what was passed in, every element of them), the argument
preparation and the launchers.

The op takes the other parameters in the PrimFunc's order; it allocates the OUTPUTS with the shapes
PARAMS gives them (symbolic sizes bound from the inputs, evaluated by `shape_value` as the launcher
does) and returns them. Written parameters that are also read stay arguments, declared mutated.
Every call runs the launcher's checks (`check_arguments`), on the inputs and again on everything
with the outputs, so the op refuses what `run()` refuses, with the same messages. The fake (meta)
implementation is the same code without the launches: shapes from the PrimFunc, not from a run.

Compiled Triton (a GPU): `torch.library.triton_op`, each kernel launched through
`torch.library.wrap_triton`, so `torch.compile` traces into the kernels (no graph break, inductor
sees and launches them). Triton's interpreter (CPU): `torch.library.custom_op`, the kernels run in
the interpreter; compiled graphs call the op as one opaque node.
A module compiled with its backward (`compile(func, wrt=...)`) names it in BACKWARD: the file of
the backward's module beside this one, which forward parameters it reads (saved by the op's
setup_context: inputs, and outputs the forward returns), and which of its parameters are the
output gradients and the input gradients. `register_backward` imports that module in this module's
mode, registers it as the op `qualname + "_backward"` and attaches it with
`torch.library.register_autograd`, so the op trains, under torch.compile too (the backward op has
its fake implementation like any other).
With saved intermediates (BACKWARD's "training" and "saved"), `register_training` registers the training
forward's module (beside this one) as the op `qualname` instead: it returns the forward's outputs and then the
saved values; setup_context keeps those, the backward takes them after the forward values it reads, and the
function returned to the caller gives the forward's outputs only.
Assumes: torch >= 2.6 (wrap_triton); the module's mode (`_INTERPRETED`) is fixed at import.
"""

import os

import torch

from .launch_replay import recorded
from .runtime_support import (_INTERPRETED, _TORCH_DTYPES, LaunchError, _expected_device_type, check_arguments,
                              shape_text, shape_value)

# --- tir-triton torch op support: begin ---
def launch_directly(kernel):
    """How run() and tune() launch a kernel; the op on a GPU passes torch.library.wrap_triton instead.
    While run() records its launches (launch_replay.py), a stand-in that launches and records."""
    return recorded(kernel)


def register_torch_op(qualname, params, outputs, prepare, launchers, configs, chosen):
    """Register the program as the PyTorch op `qualname` ("namespace::name"); return the op
    (`torch.ops.namespace.name` calls the same). Registering a name again replaces what it named,
    as torch.library does."""
    _check_qualname(qualname)
    inputs = tuple(p for p in params if p[0] not in outputs)
    _check_allocatable(qualname, params, inputs)
    mutated = tuple(name for name, kind, _dtype, _shape, written, _narrow in inputs if kind == "buffer" and written)

    def call(args, wrap):
        """Check, allocate the outputs, launch every kernel through `wrap` (none: the fake)."""
        values, results = _with_outputs(params, inputs, outputs, args)
        t, s = prepare(tuple(values[p[0]] for p in params), {})
        if wrap is not None:
            for name, launch in launchers:
                launch(t, s, configs[name][chosen[name]], wrap)
        return results[0] if len(results) == 1 else (tuple(results) if results else None)

    def traceable(*args):
        return call(args, torch.library.wrap_triton)

    def interpreted(*args):
        return call(args, launch_directly)

    def fake(*args):
        return call(args, None)

    signature = _signature(inputs, len(outputs))
    for function in (traceable, interpreted, fake):
        function.__signature__ = signature
    if not _INTERPRETED:
        return torch.library.triton_op(qualname, traceable, mutates_args=mutated)
    op = torch.library.custom_op(qualname, interpreted, mutates_args=mutated)
    op.register_fake(fake)
    return op


def register_backward(op, qualname, params, outputs, backward, module_file):
    """Attach the backward module named in `backward` (BACKWARD) to `op` as its autograd formula;
    return `op`. Gradients come back for the parameters `backward["grads"]` names, None for the
    other arguments."""
    if backward is None:
        return op
    backward_op = _import_sibling(module_file, backward["module"]).as_torch_op(qualname + "_backward")
    arguments = tuple(p[0] for p in params if p[0] not in outputs)
    reads = tuple(backward["reads"])
    saved = tuple(backward.get("saved", ()))
    tensors = tuple(name for name in reads if _is_buffer(params, name)) + saved

    def setup_context(ctx, inputs, output):
        values = dict(zip(arguments, inputs))
        values.update(zip(outputs, output if isinstance(output, tuple) else (output,)))
        ctx.save_for_backward(*(values[name] for name in tensors))
        ctx.scalars = {name: values[name] for name in reads if name not in tensors}

    def differentiate(ctx, *grads):
        values = dict(zip(tensors, ctx.saved_tensors))
        values.update(ctx.scalars)
        incoming = dict(zip(outputs, grads))
        result = backward_op(*(values[name] for name in reads), *(values[name] for name in saved),
                             *(_gradient(incoming[output], values, output) for _, output in backward["output_grads"]))
        result = result if isinstance(result, tuple) else (result,)
        by_input = {name: grad for (_, name), grad in zip(backward["grads"], result)}
        return tuple(by_input.get(name) for name in arguments)

    torch.library.register_autograd(qualname, differentiate, setup_context=setup_context)
    return op


def register_training(qualname, outputs, backward, module_file):
    """The training forward (BACKWARD["training"], beside this module) as the op `qualname`, trained by the
    backward with the saved values it writes; returns a function giving this module's outputs only."""
    training = _import_sibling(module_file, backward["training"])
    op = training.as_torch_op(qualname)
    register_backward(op, qualname, training.PARAMS, training.OUTPUTS, backward, module_file)
    count = len(outputs)

    def forward(*args):
        result = op(*args)
        return result[0] if count == 1 else tuple(result[:count])

    forward.__name__, forward.training_op = qualname.partition("::")[2], op
    return forward


def _gradient(grad, values, output):
    """The output's incoming gradient, contiguous (zeros where autograd passes none)."""
    return torch.zeros_like(values[output]) if grad is None else grad.contiguous()


def _is_buffer(params, name):
    return next(p[1] for p in params if p[0] == name) == "buffer"


def _import_sibling(module_file, file_name):
    """A module this one links (its backward, its training forward), beside it, imported in this module's
    Triton mode."""
    import importlib.util
    import sys

    path = os.path.join(os.path.dirname(os.path.abspath(module_file)), file_name)
    if not os.path.exists(path):
        raise LaunchError(f"the linked module {file_name} is not beside {os.path.basename(module_file)}: save "
                          "them together (kernel.save writes them together)")
    key = f"tir_triton_backward_{'interp' if _INTERPRETED else 'gpu'}_{path}"
    if key in sys.modules:
        return sys.modules[key]
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if _INTERPRETED else "0"
    try:
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous
    return module


def _check_qualname(qualname):
    namespace, _, name = qualname.partition("::")
    if not (namespace.isidentifier() and name.isidentifier()):
        raise LaunchError(f"cannot register the PyTorch op {qualname!r}: the name must be \"namespace::name\", "
                          "both Python identifiers")
    if namespace in ("aten", "prim", "prims"):
        raise LaunchError(f"cannot register the PyTorch op {qualname}: the namespace {namespace} is PyTorch's own; "
                          "use your project's name")


def _check_allocatable(qualname, params, inputs):
    """Every shape variable must come from an input (a whole dimension or a scalar parameter):
    the op allocates outputs from the inputs alone."""
    given = {p[0] for p in inputs if p[1] == "scalar"}
    given |= {entry for p in inputs if p[1] == "buffer" for entry in p[3] if isinstance(entry, str)}
    for name, _kind, _dtype, shape, _written, _narrow in params:
        for axis, entry in enumerate(shape):
            missing = [var for var in _shape_variables(entry) if var not in given]
            if missing:
                raise LaunchError(f"cannot register the PyTorch op {qualname}: parameter {name}: dimension {axis} is "
                                  f"{shape_text(entry)}, but {missing[0]} is the size of no input, so the op cannot "
                                  "allocate its outputs; call run() with every tensor instead")


def _shape_variables(entry):
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, tuple):
        return _shape_variables(entry[1]) + _shape_variables(entry[2])
    return []


def _with_outputs(params, inputs, outputs, args):
    """(every parameter's value by name, the new output tensors in PrimFunc order)."""
    values, sizes = check_arguments(inputs, args)
    device = next((v.device for v in values.values() if isinstance(v, torch.Tensor)), None)
    if device is None:  # only scalar inputs: the outputs go where the kernels run
        device = torch.device(_expected_device_type())
    results = []
    for name, _kind, dtype, shape, _written, _narrow in params:
        if name in outputs:
            values[name] = torch.empty(tuple(shape_value(entry, sizes) for entry in shape),
                                       dtype=_TORCH_DTYPES[dtype], device=device)
            results.append(values[name])
    return values, results


def _signature(inputs, output_count):
    """The op's Python signature, from which torch.library infers its schema."""
    import inspect

    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    annotation=torch.Tensor if kind == "buffer" else _scalar_type(dtype))
                  for name, kind, dtype, _shape, _written, _narrow in inputs]
    returns = None if output_count == 0 else torch.Tensor if output_count == 1 else tuple[(torch.Tensor,) * output_count]  # noqa: E501
    return inspect.Signature(parameters, return_annotation=returns)


def _scalar_type(dtype):
    if dtype == "bool":
        return bool
    return float if dtype.startswith(("float", "bfloat")) else int


# --- tir-triton torch op support: end ---
