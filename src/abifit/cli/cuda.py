"""`abifit cuda`: the CUDA stack and what the environment needs of it."""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli.options import Subparsers
from abifit.cli.shared import run_command
from abifit.cli.status import EXIT_OK, EXIT_PROBLEMS

HELP_PLACE = 60  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `cuda` command's arguments."""
    u = sub.add_parser(
        "cuda",
        help="the CUDA stack: toolkits, driver, GPUs, and what the environment needs of them",
        description="Report the CUDA toolkits installed side by side and which of their library "
        "directories the loader searches, the NVIDIA driver and the newest CUDA it supports, the "
        "GPUs, and the CUDA runtime libraries a Python environment needs and ships; find "
        "disagreements and kernels missing for the GPU.",
    )
    u.add_argument("--python", metavar="PATH",
                   help="interpreter of the environment (default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                   "python3 on PATH)")
    u.add_argument("--gpu", metavar="ARCH",
                   help="check the environment's GPU code for this GPU instead of this machine's")
    u.add_argument("--cache-dir", metavar="DIR", help="cache directory")
    u.add_argument("--no-cache", action="store_true", help="do not read or write the ELF cache")
    u.add_argument("--json", action="store_true", help="print one JSON document")
    u.set_defaults(run=run, verdict_line=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.cuda import CudaOptions, run_cuda
    from abifit.report.cuda import cuda_json, cuda_text
    from abifit.report.json import dumps

    options = CudaOptions(args.python, args.gpu, args.cache_dir, args.no_cache)
    report, _session = run_command(run_cuda, options, args, err)
    out.write(dumps(cuda_json(report)) + "\n" if args.json else cuda_text(report))
    return EXIT_PROBLEMS if report.findings else EXIT_OK
