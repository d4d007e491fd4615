"""The documentation's shape: a short README that leads to one page per command and topic
under docs/, and no link to a file that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import REPO

DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _relative_links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(page.read_text("utf-8"))
            if not m.group(1).startswith(("http://", "https://", "mailto:"))]


def test_the_readme_is_short_and_leads_to_every_page() -> None:
    readme = REPO / "README.md"
    assert len(readme.read_text("utf-8").splitlines()) <= 250
    linked = {(REPO / link).resolve() for link in _relative_links(readme)}
    pages = sorted(DOCS.glob("*.md"))
    assert pages, "docs/ holds no page"
    assert [p.name for p in pages if p.resolve() not in linked] == []


def test_every_relative_link_names_a_file_that_is_there() -> None:
    broken = [f"{page.relative_to(REPO)}: {link}"
              for page in [REPO / "README.md", REPO / "ARCHITECTURE.md", *DOCS.glob("*.md")]
              for link in _relative_links(page) if not (page.parent / link).exists()]
    assert broken == []


def test_every_page_has_one_title() -> None:
    for page in DOCS.glob("*.md"):
        text = page.read_text("utf-8")
        outside_code = re.sub(r"```.*?```", "", text, flags=re.S)
        titles = re.findall(r"^# ", outside_code, flags=re.M)
        assert text.startswith("# ") and len(titles) == 1, page.name


def test_the_json_page_lists_each_document_at_its_version() -> None:
    """docs/json.md's table of versions is the one the schemas pin (`schema_versions`), row
    for row."""
    from abifit.report.json import schema_versions

    rows = re.findall(r"^\| `([\w.]+)` \| (\d+) \|$", (DOCS / "json.md").read_text("utf-8"),
                      re.M)
    assert {name: int(version) for name, version in rows} == schema_versions()
    assert len(rows) == len(schema_versions())


def test_the_json_page_validates_a_document_as_it_shows() -> None:
    """The validation docs/json.md shows a user runs, with the installed schemas, on a document
    abifit wrote (a `check` document with findings), and rejects a document with a field its
    schema does not name."""
    import copy
    import json

    import jsonschema

    code = re.search(r"```python\n(.+?)```", (DOCS / "json.md").read_text("utf-8"), re.S)
    assert code is not None
    written = (REPO / "tests/golden/check_abi_fails.json").read_text("utf-8")
    assert json.loads(written)["findings"], "the document holds no finding to check"
    exec(compile(code.group(1), "docs/json.md", "exec"), {"output_of_abifit_check_json": written})
    spoiled = copy.deepcopy(json.loads(written))
    spoiled["findings"][0]["unnamed"] = 1
    with pytest.raises(jsonschema.ValidationError):
        exec(compile(code.group(1), "docs/json.md", "exec"),
             {"output_of_abifit_check_json": json.dumps(spoiled)})
