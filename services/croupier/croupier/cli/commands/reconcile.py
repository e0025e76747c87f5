"""``croupier reconcile``: the wallet's transaction log against the ledger, for a period.

Exit 0 when everything matches (rows in transit alone are no discrepancy), 1 when there
are discrepancies or bad wallet rows, 2 when it could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    bounded_int,
    ledger_at,
    ledger_of,
    output_file,
    program,
)
from croupier.cli.progress import Progress
from croupier.errors import CommandError, ExitCode, reaching
from croupier.ledger import LedgerError
from croupier.projection import ProjectionError, open_store
from croupier.projection.projector import Progress as CatchUp
from croupier.reconcile import (
    COMPARE_STEPS,
    PeriodError,
    Reconciliation,
    Summary,
    resolve_period,
)
from croupier.reconcile.report import write_csv, write_human, write_json
from croupier.reconcile.wallet import (
    BadRow,
    WalletFormatError,
    WalletRow,
    read_postgres,
)
from croupier.urls import mask_url


def register(subparsers: Any) -> None:
    """Add the ``reconcile`` sub-command."""
    parser = subparsers.add_parser(
        "reconcile",
        description=(
            "Compares every stake debited, result credited and void refunded by the wallet "
            "with the ledger, for a period of ledger positions. Exit 0: everything matches "
            "(rows in transit alone are no discrepancy); 1: discrepancies or bad wallet "
            "rows; 2: could not run. The cut-off rule: docs/reconciliation.md."
        ),
    )
    parser.add_argument(
        "--wallet",
        required=True,
        metavar="FILE|URL",
        help="the wallet log: a .csv or .jsonl file, or a postgresql:// URL",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--wallet-table", help="with a URL: the table (default wallet_transactions)"
    )
    source.add_argument("--wallet-query", help="with a URL: a query returning the log's columns")
    add_ledger_argument(parser)
    parser.add_argument("--from", dest="start", type=_moment, help="period start (RFC 3339)")
    parser.add_argument("--to", dest="end", type=_moment, help="period end, exclusive (RFC 3339)")
    parser.add_argument(
        "--positions", type=_positions, help="period as ledger positions A:B (inclusive)"
    )
    parser.add_argument(
        "--lag",
        type=bounded_int(0, 86_400),
        default=0,
        metavar="SECONDS",
        help="how long a result may take to reach the wallet (the in-transit window)",
    )
    add_json_argument(parser)
    parser.add_argument(
        "--csv", type=output_file, metavar="FILE", help="write the exceptions as CSV to FILE"
    )
    parser.set_defaults(run=run)


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a UTC offset, e.g. 2024-05-01T00:00Z")
    return moment


def _positions(text: str) -> tuple[int, int]:
    first, _, last = text.partition(":")
    if not (first.isdigit() and last.isdigit()) or int(first) < 1 or int(first) > int(last):
        raise argparse.ArgumentTypeError("positions are A:B with 1 <= A <= B, e.g. 1:50000")
    return int(first), int(last)


def run(args: argparse.Namespace) -> int:
    """Reconcile; the exit status says whether everything matched."""
    if args.positions and (args.start or args.end):
        raise CommandError("--positions and --from/--to both name the period", "give one")
    try:
        summary = asyncio.run(_reconcile(args))
    except (WalletFormatError, PeriodError, ProjectionError, LedgerError) as error:
        raise CommandError(str(error), "see `croupier reconcile --help`") from error
    return ExitCode.OK if summary.ok else ExitCode.FINDING


def _wallet_source(args: argparse.Namespace) -> Path | AsyncIterator[list[WalletRow | BadRow]]:
    """The wallet log file, or the rows of a wallet kept in PostgreSQL."""
    if args.wallet.startswith(("postgresql://", "postgres://")):
        table = args.wallet_table or (None if args.wallet_query else "wallet_transactions")
        rows = read_postgres(args.wallet, table=table, query=args.wallet_query)
        return _explained(rows, args.wallet)
    if args.wallet_table or args.wallet_query:
        raise WalletFormatError("--wallet-table and --wallet-query need a postgresql:// wallet")
    path = Path(args.wallet)
    if not path.is_file():
        raise WalletFormatError(f"no wallet log at {path}: give a .csv or .jsonl file")
    return path


async def _explained(
    rows: AsyncIterator[list[WalletRow | BadRow]], url: str
) -> AsyncIterator[list[WalletRow | BadRow]]:
    """The wallet's rows; failing to reach its database names --wallet, not the ledger."""
    with reaching(ledger=url, ledger_setting="--wallet"):
        async for chunk in rows:
            yield chunk


async def _reconcile(args: argparse.Namespace) -> Summary:
    url = ledger_of(args)
    ledger_name, wallet_name = mask_url(url), mask_url(args.wallet)
    wallet = _wallet_source(args)
    async with ledger_at(url) as ledger:
        with reaching(ledger=url):
            with _CatchingUp() as catching_up:
                head = await Reconciliation.prepare_ledger(ledger, catching_up.report)
            period = await resolve_period(
                ledger, head, positions=args.positions, start=args.start, end=args.end
            )
            async with open_store(ledger).session() as session:
                summary = Summary(period, args.lag)
                reconciliation = Reconciliation(session, summary)
                with _progress("reconcile: wallet rows", "rows") as progress:
                    if isinstance(wallet, Path):
                        await reconciliation.stage_file(wallet, progress.advance)
                    else:
                        await reconciliation.stage(wallet, progress.advance)
                with _progress("reconcile: comparing", "steps", COMPARE_STEPS) as progress:
                    await reconciliation.compare(progress.advance)
                if args.csv is not None:
                    await write_csv(args.csv, reconciliation)
                if args.json:
                    await write_json(sys.stdout, reconciliation, ledger_name, wallet_name)
                else:
                    on_ledger = f" --ledger {shlex.quote(ledger_name)}" if args.ledger else ""
                    await write_human(
                        print,
                        reconciliation,
                        ledger_name,
                        wallet_name,
                        verify=f"{program()} verify{on_ledger}",
                    )
                return summary


def _progress(what: str, unit: str, total: int | None = None) -> Progress:
    """Progress on stderr, live (a few times a second) when stderr is a terminal: what the
    command prints comes after it, so it may go to stdout whatever that is."""
    return Progress(what, unit, total, stream=sys.stderr, live=_live())


def _live() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _CatchingUp:
    """Progress of the read model's catch-up, shown only when there is one."""

    def __init__(self) -> None:
        self.progress: Progress | None = None

    def report(self, where: CatchUp) -> None:
        if self.progress is None:
            total = where.target - (where.position - where.events)
            self.progress = _progress("reconcile: read model", "events", total)
        self.progress.advance(where.events - self.progress.done)

    def __enter__(self) -> _CatchingUp:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.progress is not None:
            self.progress.__exit__(exc_type, exc, tb)
