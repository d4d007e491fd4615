"""The documentation's shape: a short README that leads to one page per command and topic
under docs/, and no link to a file that is not there."""

from __future__ import annotations

import re
from pathlib import Path

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
