"""Worker of bench_elf.py: read every dynamic symbol of the ELF files named on the command line.

For each file: `parse_elf`, then one (name, version, binding) tuple per dynamic symbol, built from
the table's bulk columns, so that no part of the reading is skipped. Prints the number of symbols
read, nothing else. It imports only abifit, so that a process running it costs what a process
reading symbols with abifit costs.

    PYTHONPATH=src python bench/_elf_read_all.py FILE...
"""

from __future__ import annotations

import sys

from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.sources import FileSource

Triple = tuple[str, str | None, int]


def symbol_triples(image: ElfImage) -> list[Triple]:
    """(name, version, binding) of every dynamic symbol, in table order."""
    table = image.symbols
    return list(zip(table.names, table.versions(), table.bindings(), strict=True))


def read_file(path: str) -> list[Triple]:
    with FileSource(path) as source:
        return symbol_triples(parse_elf(source))


def main(paths: list[str]) -> int:
    print(sum(len(read_file(path)) for path in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
