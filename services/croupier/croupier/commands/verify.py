"""``croupier verify``: walk the ledger's hash chain; exit 1 when it is broken."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.config import Settings
from croupier.ledger import VerifyReport, open_ledger


def ledger_url_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--ledger`` option: defaults to ``CROUPIER_DATABASE_URL``."""
    parser.add_argument(
        "--ledger",
        default=Settings.from_env().database_url,
        help="ledger URL (default: CROUPIER_DATABASE_URL or the local PostgreSQL)",
    )


def register(subparsers: Any) -> None:
    """Add the ``verify`` sub-command."""
    parser = subparsers.add_parser("verify", help="check the ledger's hash chain")
    ledger_url_argument(parser)
    parser.add_argument(
        "--anchor",
        type=_anchor,
        help="POSITION:HASH kept from an earlier run (its head): the chain must still hold it",
    )
    parser.set_defaults(run=run)


def _anchor(text: str) -> tuple[int, str]:
    position, _, digest = text.partition(":")
    if not position.isdigit() or len(digest) != 64:
        raise argparse.ArgumentTypeError("an anchor is POSITION:HASH, e.g. 1042:9f86d081...")
    return int(position), digest


def run(args: argparse.Namespace) -> int:
    """Print the verification report; 1 when any row is changed, removed or inserted."""
    report = asyncio.run(_verify(args.ledger, args.anchor))
    print(report.summary())
    if report.ok:  # a head worth keeping outside the database, for the next verification
        print(f"anchor for the next run: --anchor {report.head_position}:{report.head_hash}")
    return 0 if report.ok else 1


async def _verify(url: str, anchor: tuple[int, str] | None) -> VerifyReport:
    async with open_ledger(url) as ledger:
        return await ledger.verify(anchor=anchor)
