"""``croupier verify``: walk the ledger's hash chain; exit 1 when it is broken."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.errors import ExitCode
from croupier.ledger import VerifyReport
from croupier.progress import Progress


def register(subparsers: Any) -> None:
    """Add the ``verify`` sub-command."""
    parser = subparsers.add_parser(
        "verify",
        help="check the ledger's hash chain",
        description="Walk the hash chain; exit 1 and list every changed, removed or inserted "
        "row. A SQLite ledger file must exist.",
    )
    add_ledger_argument(parser)
    parser.add_argument(
        "--anchor",
        type=_anchor,
        help="POSITION:HASH kept from an earlier run (its head): the chain must still hold it",
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


def _anchor(text: str) -> tuple[int, str]:
    position, _, digest = text.partition(":")
    if not position.isdigit() or len(digest) != 64:
        raise argparse.ArgumentTypeError("an anchor is POSITION:HASH, e.g. 1042:9f86d081...")
    return int(position), digest


def run(args: argparse.Namespace) -> int:
    """Print the verification report; 1 when any row is changed, removed or inserted."""
    report = asyncio.run(_verify(ledger_of(args), args.anchor))
    if args.json:
        print_json(report.to_json())
    else:
        print(report.summary())
        if report.ok:  # a head worth keeping outside the database, for the next verification
            print(f"anchor for the next run: --anchor {report.head_position}:{report.head_hash}")
    return ExitCode.OK if report.ok else ExitCode.FINDING


async def _verify(url: str, anchor: tuple[int, str] | None) -> VerifyReport:
    async with ledger_at(url) as ledger:
        total = await ledger.last_position()
        with Progress("verify", "rows", total) as progress:
            return await ledger.verify(anchor=anchor, progress=progress.advance)
