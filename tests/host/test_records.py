"""`record_paths`: the paths of a RECORD, read as `csv.reader` reads them (the reference)."""

from __future__ import annotations

import csv
import io
import sysconfig
from pathlib import Path

import pytest

from abifit.host.environment import record_paths


def by_csv(text: str) -> list[str]:
    return [row[0] for row in csv.reader(io.StringIO(text, newline="")) if row]


def test_every_record_of_this_interpreter() -> None:
    """The RECORD of every distribution installed for the interpreter running the tests."""
    records = sorted(Path(sysconfig.get_paths()["purelib"]).glob("*.dist-info/RECORD"))
    assert len(records) >= 5, records
    for record in records:
        text = record.read_bytes().decode("utf-8", "replace")
        assert record_paths(text) == by_csv(text), record


@pytest.mark.parametrize("text", [
    "a/b.py,sha256=x,12\nc/d.so,,\n",
    "no/newline/at/end.py,sha256=x,3",
    '"a,b/c.py",sha256=x,1\nd.py,,\n',  # a comma in a path: quoted
    '"say ""hi"".py",,\n',  # a quote in a path: doubled
    "a.py,,\r\nb.py,,\r\n",  # CRLF
    "a.py,,\rb.py,,\r",  # lone CR
    "\n\na.py,,\n\n\n",  # blank lines
    ",,\n  \n \t,,\n",  # rows with an empty or blank first field
    "a\x0bb.py,,\nc\x1cd.py,,\ne\u2028f.py,,\n",  # what str.splitlines would split at
    "ünï/cödé.py,sha256=x,5\n",
    "only-a-path\n",
    "a.py,,,extra,fields\n",
])
def test_what_csv_makes_of_odd_records(text: str) -> None:
    assert record_paths(text) == by_csv(text)
