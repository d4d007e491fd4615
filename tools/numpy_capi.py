"""Write the C-API table of `src/abifit/data/numpy_capi.json` from a NumPy's headers.

    python tools/numpy_capi.py PATH/TO/numpy/_core/include/numpy/numpyconfig.h [-o OUTPUT]

Each `#define NPY_X_Y_API_VERSION 0x...` of the header becomes `api_versions["X.Y"]`: the C-API
feature version NumPy X.Y provides, which a module's `NPY_FEATURE_VERSION` is compared with when
it imports NumPy's C API (a release between two entries provides the earlier one's). The
header's release is recorded in `source`. The dtype sizes are kept as they are (they come from
`numpy.dtype.__basicsize__`, see the file). The script is not run by tests or at run time; its
output is committed. The committed table was made from numpy 2.4.6's header; the tests compare
it with the headers of the NumPy releases they install.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

OUTPUT = Path(__file__).parent.parent / "src" / "abifit" / "data" / "numpy_capi.json"
_DEFINE = re.compile(r"#define NPY_(\d+)_(\d+)_API_VERSION (0x[0-9a-fA-F]+)")


def api_versions(header: str) -> dict[str, int]:
    """`NPY_X_Y_API_VERSION` of a numpyconfig.h, by "X.Y"."""
    return {f"{a}.{b}": int(v, 16) for a, b, v in _DEFINE.findall(header)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("header", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    parser.add_argument("--release", required=True, help="the NumPy release of the header")
    args = parser.parse_args()
    table = json.loads(args.output.read_text("utf-8")) if args.output.exists() else {}
    table["source"] = (f"numpy {args.release}, numpy/_core/include/numpy/numpyconfig.h "
                       "(NPY_X_Y_API_VERSION); regenerate with tools/numpy_capi.py")
    table["api_versions"] = api_versions(args.header.read_text("utf-8"))
    args.output.write_text(json.dumps(table, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
