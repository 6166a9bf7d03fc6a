"""differentiate(func, wrt): the backward PrimFunc of an S-TIR program, itself S-TIR (reverse mode over blocks).

What it writes: a PrimFunc `<name>_backward` whose parameters are the forward parameters it reads, then the
intermediates saved by the training forward (with `save`: forward_values.py), then `d_<Y>` for each float
output Y that depends on `wrt` (the gradient flowing in), then `d_<X>` for each X in `wrt` (the gradients it
writes, in X's dtype). Its body:
  1. the forward blocks that write the intermediates the adjoints read and that are not saved, copied (recomputed);
  2. for each forward block, last first, whose output has a gradient:
     - the gradient of its output: the sum of the contributions its readers made (one block),
       or the one contribution, or the output gradient passed in;
     - max/min reductions: a block counting the ties with the result (the gradient is shared
       evenly among them, as torch.amax / torch.amin do); the value of a tuple (value, index)
       reduction, an arg-max: the gradient to the element at the program's own index (arg_reduction.py;
       torch.max(dim)'s rule), the index none (an integer);
     - running sums (scans): the suffix sum of the upstream gradient, a scan over the reversed axis;
     - product reductions: blocks counting the zero terms and multiplying the others (with the
       T.init value); a term's gradient is the product of the other terms: that product over the
       term without zeros, the product of the non-zero terms at a row's one zero, 0 where a row
       has two or more (torch.prod's rule);
     - per buffer it reads (each distinct index): a contribution block over the block's domain,
       `C[idx] (+)= upstream * d value / d read`, reducing over the variables `idx` does not
       use (an overlapping read: over the iterations that read each element, read_inversion.py);
       none where it is proven zero (a centered sum over the axis its mean averages, centered_sums.py).
       A contraction's contribution is again a contraction (dA = dC·Bᵀ), which Tiling turns into a tl.dot
       like the forward's; when the forward's operands are narrower than its accumulator (fp16 x fp16 ->
       fp32), the incoming gradient is rounded to that operand dtype in the adjoints (a ContractionAdjoint
       record), so they are dots of the forward's precision and speed, as mixed-precision training's are.
  3. `d_<X>` from X's contributions.
What was passed in, saved or recomputed (forward_values.py) is recorded on the root block (contracts/autodiff.py).
Why: the backward is a program like any other: the pipeline fuses, tiles, dumps and verifies it, and TVM's
llvm build of it is the numerics reference.
Assumes: forward.py's program shape (one block per nest, each element written once); a read at any other
index than one variable per axis (a window, a shift, a gather through data) gets a contribution that
gathers over the iterations reading each element (read_inversion.py). Nothing here is approximate: a
program it cannot differentiate exactly is refused (NotDifferentiableError) naming the block and the reason.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx

from ...contracts.autodiff import (ZERO_CONTRIBUTION, ZERO_REDUCTION, ContractionAdjoint, GradientSignature,
                                   ZeroGradient, write_records)
from ...errors import NotDifferentiableError
from ...infra.frontend import as_module
from .adjoint_rules import Partials, dtype_of, is_float
from .build import domain_of, function, load_key, loads_in, nest, replace_loads, substitute
from .arg_reduction import ARG_INDEX
from .forward import MAX, MIN, PROD, SCAN, SUM, ForwardBlock, ForwardProgram, read_forward
from .centered_sums import vanishing_reason
from .forward_values import AUTO, plan_forward_values
from .read_inversion import invert_read
from .shift_invariance import invariant_reductions


@dataclass(frozen=True)
class _Contribution:
    """`value` (over `block`'s variables) added to the read buffer at `indices`, over `iter_vars`."""
    block: ForwardBlock
    iter_vars: tuple
    buffer: object           # the buffer read (whose gradient this adds to)
    indices: tuple
    value: object


def differentiate(func: tirx.PrimFunc, wrt, *, name: str | None = None, save=None) -> tirx.PrimFunc:
    """The backward of `func` with respect to the parameters named in `wrt` (see the module doc).

    save: None (every intermediate the adjoints read is recomputed), "auto" (the reductions' outputs smaller
    than what recomputing them reads are saved: forward_values.py's rule) or a list of intermediate names.
    Saved intermediates are backward parameters after the forward's, written by
    `training_forward(func, signature(backward).saved)`."""
    func = func if isinstance(func, tirx.PrimFunc) else as_module(func)["main"]  # else says what to pass
    forward = read_forward(func)
    targets = _targets(forward, [wrt] if isinstance(wrt, str) else list(wrt))
    _check_save(forward, save)
    return _Backward(forward, targets, name or f"{forward.name}_backward", save).build()


def _check_save(forward: ForwardProgram, save) -> None:
    if save is None or save == AUTO or isinstance(save, str):
        return
    if not isinstance(save, (list, tuple)) or not all(isinstance(n, str) for n in save):
        raise NotDifferentiableError(f'PrimFunc {forward.name}: save is {save!r}; pass None, "auto" or a list of '
                                     "intermediate buffer names")


def _targets(forward: ForwardProgram, wrt: list) -> list:
    if not wrt:
        raise NotDifferentiableError(f"PrimFunc {forward.name}: wrt names no parameter")
    by_name = {p.name: p for p in forward.func.params}
    targets = []
    for name in wrt:
        param = by_name.get(name)
        if param is None:
            raise NotDifferentiableError(f"PrimFunc {forward.name}: wrt names {name!r}, which is not a parameter "
                                         f"(parameters: {', '.join(by_name)})")
        if not tirx.is_buffer_var(param) or not is_float(param.dtype):
            what = "a scalar" if not tirx.is_buffer_var(param) else f"of dtype {param.dtype}"
            raise NotDifferentiableError(f"PrimFunc {forward.name}: parameter {name} is {what}; gradients are taken "
                                         "with respect to float buffers")
        if any(param.same_as(o) for o in forward.outputs):
            raise NotDifferentiableError(f"PrimFunc {forward.name}: parameter {name} is written by "
                                         f"{forward.writer(param).where()}; gradients are taken with respect to inputs")
        if any(param.same_as(t) for t in targets):
            raise NotDifferentiableError(f"PrimFunc {forward.name}: wrt names {name} twice")
        targets.append(param)
    return targets


def _accumulation_dtype(forward: ForwardProgram) -> str:
    buffers = [p for p in forward.func.params if tirx.is_buffer_var(p)] + [b.output for b in forward.blocks]
    return "float64" if any(b.dtype == "float64" for b in buffers) else "float32"


def _active_buffers(forward: ForwardProgram, targets: list) -> set:
    """Handles of the buffers whose values depend on a target; refuses integers on the way."""
    active = {t.__chandle__() for t in targets}
    for block in forward.blocks:
        if block.kind == ARG_INDEX:
            continue  # an arg-max's index: piecewise constant, no gradient flows through it
        reads = loads_in(block.value) + (loads_in(block.init) if block.init is not None else [])
        if not any(load.source.__chandle__() in active for load in reads):
            continue
        if not is_float(block.output.dtype):
            raise NotDifferentiableError(f"{block.where()}: writes {block.output.name} ({block.output.dtype}) from "
                                         "values that depend on the differentiated inputs; no gradient flows "
                                         "through integers")
        active.add(block.output.__chandle__())
    return active


class _Backward:
    def __init__(self, forward: ForwardProgram, targets: list, name: str, save=None):
        self.forward, self.targets, self.name, self.save = forward, targets, name, save
        self.acc = _accumulation_dtype(forward)
        self.active = _active_buffers(forward, targets)
        self.terms: dict = {}          # buffer handle -> [gradient buffer passed in | _Contribution]
        self.statements: list = []     # the adjoint nests, in order
        self.allocs: list = []
        self.contractions: list = []   # ContractionAdjoint records
        self.made: set = set()         # handles of the buffers the backward itself declares
        self.zero: list = []           # ZeroGradient records: reductions and contributions proven zero
        self.taken = {p.name for p in forward.func.params} | {b.output.name for b in forward.blocks} \
            | {b.name for b in forward.blocks}

    def build(self) -> tirx.PrimFunc:
        output_grads = self._output_gradients()
        invariant = invariant_reductions(self.forward)
        why = "(it enters only as a shift of exponentials that are normalized away): its gradient is zero"
        self.zero += [ZeroGradient(ZERO_REDUCTION, b.name, b.output.name,
                                   f"every output is invariant to a shift of {b.output.name} {why}") for b in invariant]
        for block in reversed(self.forward.blocks):
            if block.output.__chandle__() in self.active and not any(block is b for b in invariant):
                upstream = self._assemble(block.output)
                if upstream is not None:
                    self._differentiate_block(block, upstream)
        grads = [(self._declare(f"d_{x.name}", x.shape, x.dtype), x) for x in self.targets]
        for param, target in grads:
            self._write_gradient(target, param)
        plan = plan_forward_values(self.forward, self.statements, self.made, self.save)
        reads = [p for p in self.forward.func.params if not tirx.is_buffer_var(p) or p.__chandle__() in plan.read]
        signature = GradientSignature(self.forward.name, tuple(p.name for p in reads),
                                      tuple((d.name, y.name) for d, y in output_grads),
                                      tuple((d.name, x.name) for d, x in grads),
                                      tuple(b.name for b in plan.saved))
        root_annotations = write_records(self.forward.func.body.block, list(plan.values), signature,
                                         self.contractions, self.zero)
        allocs = list(plan.buffers) + self.allocs
        params = reads + list(plan.saved) + [d for d, _ in output_grads] + [d for d, _ in grads]
        return function(self.name, params, [b.stmt for b in plan.recomputed] + self.statements, allocs,
                        root_annotations)

    # --- gradients in and out ---
    def _output_gradients(self) -> list:
        pairs = []
        for out in self.forward.outputs:
            if tirx.is_buffer_var(out) and out.__chandle__() in self.active:
                grad = self._declare(f"d_{out.name}", out.shape, out.dtype)
                self.terms[out.__chandle__()] = [grad]
                pairs.append((grad, out))
        if not pairs:
            names = ", ".join(t.name for t in self.targets)
            raise NotDifferentiableError(f"PrimFunc {self.forward.name}: no float output depends on {names}")
        return pairs

    def _write_gradient(self, target, param) -> None:
        terms = self.terms.get(target.__chandle__(), [])
        if len(terms) == 1 and isinstance(terms[0], _Contribution) and param.dtype == self.acc:
            self._materialize(terms[0], param)
            return
        sources = [self._as_buffer(term, f"d_{target.name}_{k}", target) for k, term in enumerate(terms)]
        domain = domain_of(target)
        indices = [iv.var for iv in domain]
        total = _sum([self._read(s, indices) for s in sources]) if sources else tirx.const(0.0, self.acc)
        self.statements.append(nest(self._unique(f"{param.name}_total"), domain, set(),
                                    tirx.Cast(param.dtype, total) if param.dtype != self.acc else total,
                                    indices, param))

    def _assemble(self, buffer):
        """The buffer holding `buffer`'s gradient (None: nothing depends on it)."""
        terms = self.terms.get(buffer.__chandle__(), [])
        if not terms:
            return None
        if len(terms) == 1:
            return self._as_buffer(terms[0], f"d_{buffer.name}", buffer)
        sources = [self._as_buffer(term, f"d_{buffer.name}_{k}", buffer) for k, term in enumerate(terms)]
        total = self._declare(f"d_{buffer.name}", buffer.shape, self.acc, alloc=True)
        domain = domain_of(buffer)
        indices = [iv.var for iv in domain]
        self.statements.append(nest(self._unique(f"{total.name}_total"), domain, set(),
                                    _sum([self._read(s, indices) for s in sources]), indices, total))
        return total

    def _as_buffer(self, term, name: str, like):
        if not isinstance(term, _Contribution):
            return term
        target = self._declare(name, like.shape, self.acc, alloc=True)
        self._materialize(term, target)
        return target

    def _materialize(self, term: _Contribution, target) -> None:
        """The contribution's block over the target's elements (read_inversion.py): its loops in the
        target's axis order, then those it reduces over (spatial loops leading, as LoopFusion needs)."""
        inversion = invert_read(term.iter_vars, term.indices, target.shape, term.buffer.name)
        value = substitute(term.value, inversion.mapping)
        if inversion.condition is not None:
            value = tirx.if_then_else(inversion.condition, value, tirx.const(0.0, dtype_of(value)))
        name = self._unique(f"{target.name}_from_{term.block.name}")
        self.statements.append(nest(name, inversion.domain, inversion.reduce, value, inversion.indices, target))

    # --- one forward block ---
    def _differentiate_block(self, block: ForwardBlock, upstream) -> None:
        partials = Partials(self.acc, block.where())
        gradient = self._read(upstream, block.out_indices)
        if block.arg_index is not None:
            gradient = self._to_the_index(block, gradient)
        elif block.kind in (MAX, MIN):
            gradient = self._share_among_ties(block, gradient)
        if block.kind == PROD:
            gradient = gradient * self._product_of_the_others(block)
        if block.kind == SCAN:
            gradient = self._suffix_sum(block, upstream)
        narrow = narrow_operand_dtype(block)
        if narrow is not None and upstream.dtype != narrow:
            gradient = tirx.Cast(self.acc, tirx.Cast(narrow, gradient))
            self.contractions.append(ContractionAdjoint(
                block.name, upstream.name, narrow,
                f"the forward multiplies {narrow} operands into {block.output.dtype}: its adjoints are dots of "
                f"{narrow} operands too (the gradient rounded to {narrow}, as mixed-precision training does), "
                "not float32 dots"))
        for load in self._active_reads(block, block.value):
            partial = _partial(partials, block.value, load)
            vanishes = vanishing_reason(self.forward, block, load, partial) if partial is not None else None
            if vanishes is not None:
                self.zero.append(ZeroGradient(ZERO_CONTRIBUTION, block.name, load.source.name, vanishes))
            elif partial is not None:
                self._add_term(load, _Contribution(block, block.iter_vars, load.source, tuple(load.indices),
                                                   partials.mul(gradient, partial)))
        if block.init is None:
            return
        spatial = tuple(iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.DataPar)
        for load in self._active_reads(block, block.init):
            if block.kind != SUM:
                raise NotDifferentiableError(f"{block.where()}: the T.init of a {block.kind} reduction reads "
                                             f"{load.source.name}, which depends on the differentiated inputs")
            partial = _partial(partials, block.init, load)
            if partial is not None:
                value = partials.mul(self._read(upstream, block.out_indices), partial)
                self._add_term(load, _Contribution(block, spatial, load.source, tuple(load.indices), value))

    def _share_among_ties(self, block: ForwardBlock, gradient):
        """max/min: every element equal to the result gets gradient / (how many are equal)."""
        result = tirx.BufferLoad(block.output, list(block.out_indices))
        tie = block.value == result
        count = self._declare(f"{block.output.name}_ties", block.output.shape, self.acc, alloc=True)
        one, zero = tirx.const(1.0, self.acc), tirx.const(0.0, self.acc)
        self.statements.append(nest(self._unique(f"{block.name}_ties"), list(block.iter_vars),
                                    {v.__chandle__() for v in block.reduce_vars()}, tirx.Select(tie, one, zero),
                                    block.out_indices, count))
        return tirx.Select(tie, gradient / tirx.BufferLoad(count, list(block.out_indices)), zero)

    def _to_the_index(self, block: ForwardBlock, gradient):
        """A tuple reduction's value: the element at the index the program computed takes the gradient (and,
        where the index's init could name an element, only if it equals the value: one never taken does not)."""
        index, position, guarded = block.arg_index
        at = tirx.BufferLoad(index, list(block.out_indices))
        here = position if dtype_of(position) == index.dtype else tirx.Cast(index.dtype, position)
        taken = here == at
        if guarded:
            taken = tirx.And(taken, block.value == tirx.BufferLoad(block.output, list(block.out_indices)))
        return tirx.Select(taken, gradient, tirx.const(0.0, self.acc))

    def _suffix_sum(self, block: ForwardBlock, upstream):
        """A running sum's element k feeds every output from k on: its gradient is the sum of the
        upstream gradient from k to the end, a running sum over the reversed axis (itself a scan; the
        axis starts at 0, forward.py checks it)."""
        walked = block.scan_var.var
        mirrored = block.scan_var.dom.extent - 1 - walked
        axis = next(k for k, index in enumerate(block.out_indices) if index.same_as(walked))

        def along(indices, position):
            return [position if k == axis else index for k, index in enumerate(indices)]

        reversed_sum = self._declare(f"{upstream.name}_suffix", block.output.shape, self.acc, alloc=True)
        earlier = tirx.BufferLoad(reversed_sum, along(block.out_indices, walked - 1))
        value = self._read(upstream, along(block.out_indices, mirrored)) + \
            tirx.if_then_else(walked > 0, earlier, tirx.const(0.0, self.acc))
        self.statements.append(nest(self._unique(f"{block.name}_suffix"), list(block.iter_vars), set(), value,
                                    block.out_indices, reversed_sum))
        return tirx.BufferLoad(reversed_sum, along(block.out_indices, mirrored))

    def _product_of_the_others(self, block: ForwardBlock):
        """d (init * prod_k t_k) / d t_k, exact where terms are 0: from the count of zero terms and the
        product of the non-zero ones (no division by a zero term)."""
        term = block.value if dtype_of(block.value) == self.acc else tirx.Cast(self.acc, block.value)
        one, zero = tirx.const(1.0, self.acc), tirx.const(0.0, self.acc)
        is_zero = term == zero
        reduce = {v.__chandle__() for v in block.reduce_vars()}
        zeros = self._declare(f"{block.output.name}_zeros", block.output.shape, self.acc, alloc=True)
        self.statements.append(nest(self._unique(f"{block.name}_zeros"), list(block.iter_vars), reduce,
                                    tirx.Select(is_zero, one, zero), block.out_indices, zeros))
        init = block.init if dtype_of(block.init) == self.acc else tirx.Cast(self.acc, block.init)
        others = self._declare(f"{block.output.name}_nonzero", block.output.shape, self.acc, alloc=True)
        self.statements.append(nest(self._unique(f"{block.name}_nonzero"), list(block.iter_vars), reduce,
                                    tirx.Select(is_zero, one, term), block.out_indices, others, init=init,
                                    fold=tirx.Mul))
        count = tirx.BufferLoad(zeros, list(block.out_indices))
        product = tirx.BufferLoad(others, list(block.out_indices))
        at_the_one_zero = tirx.Select(tirx.And(count == one, is_zero), product, zero)
        return tirx.Select(count == zero, product / term, at_the_one_zero)

    def _active_reads(self, block: ForwardBlock, expr) -> list:
        distinct = {}
        for load in loads_in(expr):
            if load.source.__chandle__() in self.active and is_float(dtype_of(load)):
                distinct.setdefault(load_key(load), load)
        return list(distinct.values())

    def _add_term(self, load, term: _Contribution) -> None:
        self.terms.setdefault(load.source.__chandle__(), []).append(term)

    # --- small helpers ---
    def _read(self, buffer, indices):
        load = tirx.BufferLoad(buffer, list(indices))
        return load if buffer.dtype == self.acc else tirx.Cast(self.acc, load)

    def _declare(self, name: str, shape, dtype: str, alloc: bool = False):
        buffer = tirx.decl_buffer(shape, dtype, self._unique(name), layout=None)
        self.made.add(buffer.__chandle__())
        if alloc:
            self.allocs.append(buffer)
        return buffer

    def _unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self.taken:
            candidate, n = f"{name}_{n}", n + 1
        self.taken.add(candidate)
        return candidate


def narrow_operand_dtype(block: ForwardBlock) -> str | None:
    """The operand dtype of a contraction `out += Cast(wide, a) * Cast(wide, b)` whose operands `a`, `b`
    are both of one float dtype narrower than `out`'s (None for anything else): loads of that dtype, or
    a wider load rounded to it (attention's `Cast(f32, Cast(f16, weights[i, j])) * Cast(f32, V[j, d])`)."""
    if block.kind != SUM or not isinstance(block.value, tirx.Mul):
        return None
    operands = [block.value.a, block.value.b]
    if not all(isinstance(x, tirx.Cast) and _narrowed_load(x.value) is not None for x in operands):
        return None
    dtypes = {dtype_of(x.value) for x in operands}
    narrow = dtypes.pop() if len(dtypes) == 1 else None
    wide = block.output.dtype
    if narrow is None or not is_float(narrow) or not is_float(wide) or _bits(narrow) >= _bits(wide):
        return None
    return narrow if _is_contraction(block, [_narrowed_load(x.value) for x in operands]) else None


def _narrowed_load(expr):
    """The load of `load` or `Cast(dtype, load)` (None for another expression)."""
    if isinstance(expr, tirx.Cast) and isinstance(expr.value, tvm.ir.TensorLoad):
        return expr.value
    return expr if isinstance(expr, tvm.ir.TensorLoad) else None


def _is_contraction(block: ForwardBlock, loads: list) -> bool:
    """Each operand lacks a spatial variable the other has (A[i, k]·B[k, j]): a tl.dot's shape, not a
    weighted row reduction (X[i, k]·X[i, k], X[i, k]·w[k]), whose adjoint is elementwise."""
    spatial = {v.__chandle__() for v in block.out_indices}
    used = [{v.__chandle__() for index in load.indices for v in _vars_in(index)} & spatial for load in loads]
    return bool(used[0] - used[1]) and bool(used[1] - used[0])


def _vars_in(expr) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.Var, found.append))
    return found


def _bits(dtype: str) -> int:
    return int("".join(ch for ch in dtype if ch.isdigit()))


def _partial(partials: Partials, expr, load):
    """d expr / d load, with the load's value where the derivative needs it."""
    placeholder = tirx.Var(f"{load.source.name}_value", dtype_of(load))
    derivative = partials.d(replace_loads(expr, {load_key(load): placeholder}), placeholder)
    if derivative is None:
        return None
    return substitute(derivative, {placeholder.__chandle__(): load})


def _sum(values: list):
    return functools.reduce(lambda total, value: total + value, values)
