"""``croupier contracts``: write (or check) the JSON Schemas under ``contracts/``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from croupier.cli.console import add_json_argument, output_folder, print_json
from croupier.schemas import check_schemas, write_schemas


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the ``contracts`` sub-command."""
    parser = subparsers.add_parser("contracts")
    parser.add_argument(
        "--out",
        type=output_folder,
        default=Path("contracts"),
        help="target folder (made if its parent exists)",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if any file is out of date"
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the schemas, or with ``--check`` list the files that differ."""
    out: Path = args.out
    if args.check:
        stale = check_schemas(out)
        if args.json:
            print_json({"stale": [str(out / line) for line in stale]})
            return 1 if stale else 0
        for line in stale:
            print(f"out of date: {out / line}", file=sys.stderr)
        if stale:
            print("run `make contracts` and commit the result", file=sys.stderr)
        return 1 if stale else 0
    written = write_schemas(out)
    if args.json:
        print_json({"written": [str(path) for path in written]})
    else:
        for path in written:
            print(path)
    return 0
