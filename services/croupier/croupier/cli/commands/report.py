"""``croupier report hold --day YYYY-MM-DD``: the day's hold from the ledger, to the unit."""

from __future__ import annotations

import argparse
import asyncio
from datetime import date
from typing import Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.errors import ExitCode, reaching
from croupier.projection import open_store
from croupier.reconcile import Reconciliation
from croupier.reports.hold import MONEY, HoldLine, differing_rounds, hold_lines, totals
from croupier.urls import mask_url


def register(subparsers: Any) -> None:
    """Add the ``report`` sub-command (``report hold``)."""
    parser = subparsers.add_parser("report")
    reports = parser.add_subparsers(dest="report", required=True, metavar="REPORT")
    hold = reports.add_parser(
        "hold",
        help="the day's wagered, returned, refunds, jackpot and hold per table",
        description=(
            "Per table, pay table and currency: wagered, returned, refunds, jackpot "
            "contributions, awards and reseeds, and hold, by settlement time (UTC), and by "
            "game time where the two differ. Exact to the unit: read from the ledger."
        ),
    )
    hold.add_argument("--day", required=True, type=_day, help="the UTC day, YYYY-MM-DD")
    add_ledger_argument(hold)
    add_json_argument(hold)
    hold.set_defaults(run=run)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day: YYYY-MM-DD") from None


def run(args: argparse.Namespace) -> int:
    """Print the report."""
    document = asyncio.run(_hold(ledger_of(args), args.day))
    if args.json:
        print_json(document)
    else:
        _print(document)
    return ExitCode.OK


async def _hold(url: str, day: date) -> dict[str, Any]:
    async with ledger_at(url) as ledger:
        with reaching(ledger=url):
            head = await Reconciliation.prepare_ledger(ledger)
            async with open_store(ledger).session() as session:
                settled = await hold_lines(session, day, "settled_day")
                differ = await differing_rounds(session, day)
                played = await hold_lines(session, day, "game_day") if differ else None
    return {
        "report": "croupier.reports.hold",
        "day": day.isoformat(),
        "ledger": {"url": mask_url(url), "position": head},
        "by_settlement_time": _section(settled),
        "rounds_with_other_game_day": differ,
        "by_game_time": None if played is None else _section(played),
    }


def _section(lines: list[HoldLine]) -> dict[str, Any]:
    return {
        "lines": [line.as_json() for line in lines],
        "totals": [line.as_json() for line in totals(lines)],
    }


_HEADER = ("table", "pay table", "cur", "rounds", "void", *MONEY, "hold %")


def _print(document: dict[str, Any]) -> None:
    print(
        f"hold on {document['day']} (UTC), ledger {document['ledger']['url']} "
        f"up to position {document['ledger']['position']:,}; amounts in minor units"
    )
    sections = [("by settlement time", document["by_settlement_time"])]
    if document["by_game_time"] is not None:
        sections.append(("by game time", document["by_game_time"]))
        print(
            f"{document['rounds_with_other_game_day']:,} rounds were dealt on another day "
            "than they settled: both views follow"
        )
    for title, section in sections:
        print(f"\n{title}")
        rows = [
            (
                line["table_id"], line["paytable"], line["currency"], line["rounds"],
                line["voided"], *(line[column] for column in MONEY), line["hold_percent"],
            )
            for line in section["lines"] + section["totals"]
        ]  # fmt: skip
        if not rows:
            print("  no rounds settled")
            continue
        widths = [max(len(_cell(row[i])) for row in [_HEADER, *rows]) for i in range(len(_HEADER))]
        for row in [_HEADER, *rows]:
            cells = [
                _cell(v).ljust(w) if i < 3 else _cell(v).rjust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ]
            print("  " + "  ".join(cells))


def _cell(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)
