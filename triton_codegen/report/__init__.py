"""`tir-triton report`: one self-contained HTML page about a compiled PrimFunc.

The page shows every stage of the pass pipeline with its time and checks and a side-by-side diff
against the previous stage (collapsed where nothing changed), each pass's decisions with their
reasons (read back from the IR's annotations), the tile program and the generated Triton module
highlighted, and, given a GPU benchmark result, the kernel's place under the roofline.

Libraries, and why: jinja2 templates with autoescaping build the HTML (the markup lives in one
template, every value is escaped); pygments highlights TVMScript and Triton (both Python) and the
tile program (a small lexer here); difflib's SequenceMatcher pairs the lines of the diffs;
matplotlib draws the roofline, embedded as a PNG data URI. The page loads nothing from the
network: CSS is inline and there is no script.
"""

from .page import Report, build_report, render_report, write_report

__all__ = ["Report", "build_report", "render_report", "write_report"]
