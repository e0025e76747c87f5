"""``croupier rounds --open``: the ledger's open rounds, oldest first, and what each waits for.

Reads the ledger only (every round stream without a settlement or void, searched from the
ledger's open floor: rounds begun since the oldest open one, whatever the ledger's size), so
it shows what any instance left open, also rounds no running service holds in memory. Each
row says when the service voids the round (``CROUPIER_ROUND_TIMEOUT`` after its first fact).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    age_text,
    bounded_int,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.config import settings
from croupier.errors import ExitCode
from croupier.settlement.round import Round
from croupier.settlement.settler import Settler


def register(subparsers: Any) -> None:
    """Add the ``rounds`` sub-command."""
    parser = subparsers.add_parser("rounds", description=__doc__)
    parser.add_argument(
        "--open", action="store_true", required=True, help="the rounds not settled or voided"
    )
    parser.add_argument(
        "--limit", type=bounded_int(1, 1_000_000), default=10_000, help="rounds at most"
    )
    add_ledger_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the open rounds (0 whether or not there are any)."""
    timeout = settings().round_timeout
    rows = asyncio.run(_open_rounds(ledger_of(args), args.limit, timeout))
    if args.json:
        print_json({"open": len(rows), "round_timeout_seconds": timeout, "rounds": rows})
        return ExitCode.OK
    for row in rows:
        left = row["times_out_in_seconds"]
        due = f"voided in {age_text(left)}" if left > 0 else "voided at the next sweep"
        print(
            f"{row['table_id']:<20} {row['round_id']:<32} open {age_text(row['age_seconds']):>9}  "
            f"{row['waiting_for']}  ({due})"
        )
    print(f"{len(rows)} open round{'s' if len(rows) != 1 else ''}")
    return ExitCode.OK


async def _open_rounds(url: str, limit: int, timeout: float) -> list[dict[str, Any]]:
    async with ledger_at(url) as ledger:
        settler = Settler(ledger, cache_rounds=limit)
        await settler.load_open(limit)
        now = time.time()
        rounds = sorted(settler.rounds, key=lambda r: r.started_at or now)
        return [_row(state, now, timeout) for state in rounds]


def _row(state: Round, now: float, timeout: float) -> dict[str, Any]:
    started = state.started_at or now
    return {
        "table_id": state.table_id,
        "round_id": state.round_id,
        "paytable": state.table.id if state.table else None,
        "opened_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "age_seconds": round(now - started, 3),
        "waiting_for": state.waiting_for,
        "next_seq": state.next_seq,
        "held_seqs": sorted(state.held),
        "held_for_seconds": round(now - state.held_since, 3) if state.held_since else None,
        "bets": len(state.bets),
        "times_out_at": datetime.fromtimestamp(started + timeout, UTC).isoformat(),
        "times_out_in_seconds": round(started + timeout - now, 3),
    }
