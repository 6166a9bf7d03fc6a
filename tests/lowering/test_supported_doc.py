"""docs/supported.md is what the lowering's tables say: regenerate it with
`python -m lowering.supported_doc` when a rule is added or removed."""

import os

from lowering.rules.exprs import RULES, supported_calls
from lowering.supported_doc import PATH, render


def test_the_page_is_the_tables():
    with open(PATH) as handle:
        assert handle.read() == render(), "docs/supported.md is stale: run `python -m lowering.supported_doc`"


def test_every_rule_and_call_is_on_the_page():
    text = render()
    for node in RULES:
        assert f"| {node.__name__} |" in text
    for name in supported_calls():
        assert f"`T.{name}(" in text
    # TVM operators no rule lowers are named as refused
    assert "`acos`" in text.split("Refused, with")[1] and "`tirx.ptx.*`" in text
    assert os.path.basename(PATH) == "supported.md"
