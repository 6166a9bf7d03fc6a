"""The compiled kernel a backend returns: its module's source, and a callable that runs it.

`CompiledKernel` holds what every backend shares (save, import, run, the manifest's common part);
a backend's kernel class adds what differs (how it runs, its kernels' manifest entries).
"""

from __future__ import annotations

import os

import torch

from lowering.printer import format_program
from tir_passes.errors import FrontendError, LaunchError

from . import loader
from .backward_link import BackwardLink
from .configs import config_space
from .emit_module import VERSION, emit_module
from .environment import interpreting


def interpret_mode(interpret: bool | None) -> bool:
    """Interpret on CPU-only machines or when TRITON_INTERPRET=1; compile for the GPU otherwise."""
    if interpret is not None:
        return interpret
    return interpreting() or not torch.cuda.is_available()


def _require_interpreted_triton(name: str, what: str) -> None:
    if not loader.triton_library_interpreted():
        raise LaunchError(f"{name}: {what} on the CPU needs Triton's interpreter, but Triton was imported "
                          "in compiled mode: set TRITON_INTERPRET=1 before anything imports triton")


class CompiledKernel:
    """A compiled PrimFunc: `.source`, `.save(path)`, `.module()`, `.manifest()`, `__call__`."""

    backend = "triton"

    def __init__(self, name: str, source: str, program, tir_module, pipeline_result=None):
        self.name = name
        self.source = source
        self.program = program
        self.tir = tir_module
        self.pipeline = pipeline_result
        self.check_report = None   # the kernel check compile(verify=True) ran
        self.backward: CompiledKernel | None = None       # compile(wrt=...): the backward, which as_torch_op attaches
        self.backward_link: BackwardLink | None = None
        self.training: CompiledKernel | None = None       # compile(wrt=..., save=...): the training forward the op runs
        self.float32_matmul_precision: str | None = None   # what compile() used (lowering/matmul_precision.py)
        self.advice: tuple = ()     # what costs speed and what to write instead (advice.py; the Triton backend)
        self._path: str | None = None

    def with_backward(self, backward: CompiledKernel, link: BackwardLink,
                      training: CompiledKernel | None = None) -> CompiledKernel:
        """This kernel with its module naming `backward` (docs/autodiff.md); a backend that cannot
        attach one refuses."""
        raise FrontendError(f"the {self.backend} backend does not attach a backward (compile(wrt=...)): use triton")

    def save(self, path: str) -> str:
        """Write the module (a directory gets `<name>.py`), and its backward's beside it when it has
        one; returns the forward's file."""
        if os.path.isdir(path) or path.endswith(os.sep):
            os.makedirs(path, exist_ok=True)
            path = os.path.join(path, f"{loader.file_stem(self.name)}.py")
        files = [(path, self.source)]
        if self.backward is not None:
            files.append((os.path.join(os.path.dirname(path), self.backward_link.module), self.backward.source))
        files += [(os.path.join(os.path.dirname(path), name), text) for name, text in self._siblings()]
        for file_path, text in files:
            try:
                with open(file_path, "w") as handle:
                    handle.write(text)
            except OSError as err:
                raise FrontendError(f"cannot write {file_path}: {err.strerror or err}") from None
        return path

    def module_file(self) -> str:
        if self._path is None and self.backward is not None:
            self._path = loader.module_pair_path(self.source, self.name, self.backward.source,
                                                 self.backward_link.module, self._siblings())
        if self._path is None:
            self._path = loader.module_path(self.source, self.name)
        return self._path

    def _siblings(self) -> tuple[tuple[str, str], ...]:
        """(file, source) of the modules the forward imports from beside itself other than the backward."""
        if self.training is None:
            return ()
        return ((self.backward_link.training, self.training.source),)

    def module(self, interpret: bool | None = None):
        return loader.import_module(self.module_file(), interpret_mode(interpret))

    def __call__(self, *args, interpret: bool | None = None, **kwargs):
        """Run the module's `run`: arguments by position or by the PrimFunc's parameter names (a
        parameter named `interpret` can only be given by position)."""
        interpret = interpret_mode(interpret)
        if interpret:
            _require_interpreted_triton(self.name, "running")
        module = self.module(interpret)
        try:
            with loader.triton_mode(interpret):
                return module.run(*args, **kwargs)
        except module.LaunchError as err:
            raise LaunchError(f"{self.name}: {err}") from None

    def as_torch_op(self, qualname: str, interpret: bool | None = None):
        """Register the kernel as the PyTorch op `qualname` ("namespace::name") and return it: it
        takes the parameters the program reads, allocates and returns those it only writes; see
        docs/pytorch.md. The same as a saved module's `as_torch_op(qualname)`."""
        interpret = interpret_mode(interpret)
        if interpret:
            _require_interpreted_triton(self.name, "an op running")
        module = self.module(interpret)
        try:
            return module.as_torch_op(qualname)
        except module.LaunchError as err:
            raise LaunchError(f"{self.name}: {err}") from None

    def kernels_manifest(self) -> list[dict]:
        raise NotImplementedError

    def manifest(self) -> dict:
        return {
            "name": self.name,
            "backend": self.backend,
            "entry_point": "run",
            "tir_triton_version": VERSION,
            "source_structural_hash": self.program.source_hash,
            "passes": list(self.program.passes),
            "deterministic": bool(getattr(self.program, "deterministic", False)),
            "float32_matmul_precision": self.float32_matmul_precision,
            "params": [{"name": p.name, "kind": p.kind, "dtype": p.dtype, "shape": list(p.shape), "written": p.written,
                        "read": p.read}
                       for p in self.program.params],
            "kernels": self.kernels_manifest(),
        }

    def write_manifest(self, path: str, module_file: str | None = None) -> str:
        """Add this module (`module_file`, default `<name>.py`) to the folder's manifest at `path`,
        keeping the other modules listed there (writeback.add_to_manifest)."""
        from .writeback import add_to_manifest

        try:
            return add_to_manifest(path, module_file or f"{self.name}.py", self.manifest())
        except OSError as err:
            raise FrontendError(f"cannot write {path}: {err.strerror or err}") from None


class TritonKernel(CompiledKernel):
    """A PrimFunc compiled to Triton."""

    @property
    def tile_ir(self) -> str:
        return format_program(self.program)

    def with_backward(self, backward: CompiledKernel, link: BackwardLink,
                      training: CompiledKernel | None = None) -> TritonKernel:
        kernel = TritonKernel(self.name, emit_module(self.program, link), self.program, self.tir, self.pipeline)
        kernel.backward, kernel.backward_link, kernel.training = backward, link, training
        return kernel

    def kernels_manifest(self) -> list[dict]:
        return [{"name": k.name, "blocks": list(k.source_blocks), "block_sizes": k.block_sizes,
                 "num_warps": k.num_warps, "num_stages": k.num_stages, "configs": config_space(k),
                 **({"pinned": [{"name": n, "value": v, "why": w} for n, v, w in k.pins]} if k.pins else {}),
                 **({"at_least": [{"name": n, "minimum": v, "why": w} for n, v, w in k.floors]} if k.floors else {})}
                for k in self.program.kernels]
