"""What the README and docs/ tell a new user to type stays true: a dump they name (`dumps/11_LoopFusion.py`,
`stage 15: NormalizeLoopStarts`) has the number the default pipeline gives that pass, and no page
cites a path outside the repository (a reader's clone has none of them)."""

import os
import re

import pytest

from tir_passes.pass_order import default_pass_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
                              if name.endswith(".md"))
STAGE = re.compile(r"\b(\d{2})_([A-Z]\w*)|\bstage (\d{2}): ([A-Z]\w*)")
# this machine's folders and the ones beside the repository: absolute paths a clone does not have
OUTSIDE = re.compile(r"(?<![\w.$])(?:/work|/root|/home|/tmp|/mnt)/|(?<![\w.])\.\./(?:\.\./|shared\b)")


def _read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        return handle.read()


def stage_names(text: str) -> list[tuple[int, str]]:
    """(number, pass) of every dump or stage the text names."""
    return [(int(match[0] or match[2]), match[1] or match[3]) for match in STAGE.findall(text)]


def outside_paths(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if OUTSIDE.search(line)]


@pytest.mark.parametrize("name", DOCS)
def test_a_named_dump_has_its_pass_number(name):
    order = default_pass_names()
    for number, pass_name in stage_names(_read(name)):
        if pass_name in order:
            assert number == order.index(pass_name) + 1, f"{name}: {number:02d}_{pass_name} is stage " \
                                                         f"{order.index(pass_name) + 1:02d}"


@pytest.mark.parametrize("name", DOCS)
def test_no_page_cites_a_path_outside_the_repository(name):
    assert outside_paths(_read(name)) == [], name


def test_the_checks_see_what_they_look_for():
    assert stage_names("`dumps/03_LoopFusion.py`; `# tir-triton stage 15: NormalizeLoopStarts (no-op") == [
        (3, "LoopFusion"), (15, "NormalizeLoopStarts")]
    assert outside_paths("see ../shared/docs/x.md\n(`/work/.library/device/README.md`)\nsrc/work/a\n") == [
        "see ../shared/docs/x.md", "(`/work/.library/device/README.md`)"]
    assert outside_paths('`"../..$TMPDIR/x"` saves as `_TMPDIR_x.py`; `$OUT/run.json`; docs/../README.md') == []
