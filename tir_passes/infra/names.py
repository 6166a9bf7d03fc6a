"""Names in generated code, shared by the passes, the lowering and the TVM-free runtime side
(the AOT compiler and the hardware model of a saved module): no TVM here."""

import keyword
import re


# names a generated module means itself inside a kernel: a TIR name equal to one would shadow it
MODULE_NAMES = frozenset(keyword.kwlist + keyword.softkwlist + [
    "tl", "triton", "torch", "math", "numbers", "range", "float", "int", "bool", "min", "max", "abs", "len",
    # a @triton.jit function's launch keywords: a kernel parameter so named is never bound
    "num_warps", "num_stages", "num_ctas", "maxnreg", "grid", "warmup", "debug", "GROUP_M"])

# the shapes of the names the code generator derives from TIR names or makes for itself (a
# buffer's pointer and strides, its tensor descriptors and tiles, block sizes, kernels): a TIR name
# of one of these shapes is escaped, so it can never be one of them
DERIVED_NAMES = re.compile(r"BLOCK_\w+|\w+_ptr|\w+_stride\d+|\w+_desc\d*|\w+_tile|\w+_kernel\d+(_tma)?")


def python_name(name: str) -> str:
    """`name` made a Python identifier (kernel, axis, loop and scalar names in generated code), in
    the namespace of TIR names: a name that is a keyword or one of MODULE_NAMES, has the shape of a
    derived name (DERIVED_NAMES), or starts or ends with `_` (where the module's helpers live)
    gets one more `_` at its end. The module's own names never end with `_`, so no TIR name can
    become one of them, and distinct names stay distinct. The generator's other names (a kernel's
    temporaries, the lowering's registers) are drawn from a NameTable that holds every TIR name
    of the kernel first."""
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    cleaned = cleaned if cleaned and not cleaned[0].isdigit() else f"v_{cleaned}"
    if (cleaned in MODULE_NAMES or cleaned.startswith("_") or cleaned.endswith("_")
            or DERIVED_NAMES.fullmatch(cleaned)):
        return f"{cleaned}_"
    return cleaned


class NameTable:
    """Names the generator makes (a kernel's temporaries, the lowering's registers): each is
    `base`, or `base_1`, `base_2`, ..., the first that no name already taken (`taken`: every TIR
    name the kernel holds, as python_name wrote it, and the generator's own) and no earlier
    fresh name holds."""

    def __init__(self, taken=()) -> None:
        self.taken: set[str] = set(taken)
        self.used: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        while True:
            count = self.used.get(base, 0)
            self.used[base] = count + 1
            name = base if count == 0 else f"{base}_{count}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def pointer_name(buffer: str) -> str:
    """The kernel argument that points at `buffer` (TE names such as `A_red_temp.v0` made identifiers)."""
    return f"{python_name(buffer)}_ptr"


def stride_name(buffer: str, axis: int) -> str:
    return f"{python_name(buffer)}_stride{axis}"

