"""The reconciliation report: a human summary, JSON (``contracts/reconcile/``), exceptions CSV.

Discrepancies and player differences are streamed from the database into each output, so a
report of any size is written in flat memory. The CSV is written to a temporary file and
renamed into place: a killed run leaves no half-written report.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any, Final, TextIO

from croupier.reconcile import (
    DISCREPANCY_FIELDS,
    KINDS,
    MOVEMENTS,
    REFUNDED_STAKE,
    Discrepancy,
    Reconciliation,
    Summary,
    as_dict,
)

REPORT_VERSION: Final = 1
CSV_COLUMNS: Final = DISCREPANCY_FIELDS
SHOWN: Final = 20  # discrepancies and players listed in the human summary


def summary_json(summary: Summary, ledger: str, wallet: str) -> dict[str, Any]:
    """The report's fields other than the two streamed lists."""
    p = summary.period
    currencies = sorted(summary.matched.keys() | summary.discrepancies.keys())
    return {
        "report": "croupier.reconciliation",
        "version": REPORT_VERSION,
        "ok": summary.ok,
        "ledger": {
            "url": ledger,
            "first_position": p.first,
            "last_position": p.last,
            "first_recorded_at": p.first_at,
            "last_recorded_at": p.last_at,
            "last_hash": p.last_hash,
            "head_position": p.head,
            "head_hash": p.head_hash,
        },
        "wallet": {
            "source": wallet,
            "rows": summary.wallet_rows,
            "bad_row_count": summary.bad_row_count,
            "bad_rows": [{"line": b.line, "reason": b.reason} for b in summary.bad_rows],
            "outside_period": {
                "earlier": summary.outside.get("earlier", 0),
                "later": summary.outside.get("later", 0),
            },
        },
        "lag_seconds": summary.lag_seconds,
        "currencies": [_currency(summary, c) for c in currencies],
    }


def _currency(summary: Summary, currency: str) -> dict[str, Any]:
    matched = summary.matched.get(currency, {})
    found = summary.discrepancies.get(currency, {})
    return {
        "currency": currency,
        "matched": {
            "count": sum(matched.get(m, [0, 0])[0] for m in MOVEMENTS),
            "amount": sum(matched.get(m, [0, 0])[1] for m in MOVEMENTS),
            **{
                m: {"count": matched.get(m, [0, 0])[0], "amount": matched.get(m, [0, 0])[1]}
                for m in (*MOVEMENTS, REFUNDED_STAKE)
            },
        },
        "discrepancies": {
            kind: {
                "count": found.get(kind, [0, 0, 0])[0],
                "wallet_amount": found.get(kind, [0, 0, 0])[1],
                "ledger_amount": found.get(kind, [0, 0, 0])[2],
            }
            for kind in KINDS
        },
    }


async def write_json(out: TextIO, reconciliation: Reconciliation, ledger: str, wallet: str) -> None:
    """The whole report as one JSON document, the lists streamed."""
    head = json.dumps(summary_json(reconciliation.summary, ledger, wallet), indent=None)
    out.write(head[:-1] + ', "discrepancies": [')
    first = True
    async for item in reconciliation.discrepancies():
        out.write(("" if first else ",") + "\n  " + json.dumps(as_dict(item)))
        first = False
    out.write('\n], "players": [')
    first = True
    async for player, currency, difference in reconciliation.player_differences():
        row = {"player_id": player, "currency": currency, "net_difference": difference}
        out.write(("" if first else ",") + "\n  " + json.dumps(row))
        first = False
    out.write("\n]}\n")


async def write_csv(path: Path, reconciliation: Reconciliation) -> int:
    """Every discrepancy (and row in transit) as CSV at ``path``; the number of rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    count = 0
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(CSV_COLUMNS)
            async for item in reconciliation.discrepancies():
                writer.writerow(["" if v is None else v for v in as_dict(item).values()])
                count += 1
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return count


async def write_human(
    say: Callable[[str], None],
    reconciliation: Reconciliation,
    ledger: str,
    wallet: str,
    *,
    verify: str = "croupier verify",
) -> None:
    """A summary a person reads: totals per currency, the first exceptions, the verdict.
    ``verify`` is the command that checks this ledger, printed with the anchor to check."""
    s = reconciliation.summary
    p = s.period
    say(f"ledger   {ledger}: positions {p.first:,}..{p.last:,} ({p.first_at} .. {p.last_at})")
    say(f"         hash at {p.last:,}: {p.last_hash}  ({verify} --anchor {p.last}:{p.last_hash})")
    say(f"         head {p.head:,}: {p.head_hash}")
    outside = s.outside
    say(
        f"wallet   {wallet}: {s.wallet_rows:,} rows, {s.bad_row_count:,} bad; "
        f"{outside.get('earlier', 0):,} before and {outside.get('later', 0):,} after the period"
    )
    for currency in sorted(s.matched.keys() | s.discrepancies.keys()):
        matched = s.matched.get(currency, {})
        parts = ", ".join(
            f"{m} {matched[m][0]:,} / {matched[m][1]:,}"
            for m in (*MOVEMENTS, REFUNDED_STAKE)
            if m in matched
        )
        say(f"{currency}      matched (count / minor units): {parts or 'nothing'}")
        for kind, (count, wallet_amount, ledger_amount) in sorted(
            s.discrepancies.get(currency, {}).items(), key=lambda kv: KINDS.index(kv[0])
        ):
            say(
                f"         {kind:<20} {count:>8,}  wallet {wallet_amount:>14,}  "
                f"ledger {ledger_amount:>14,}"
            )
    for bad in s.bad_rows[:SHOWN]:
        say(f"bad row  line {bad.line}: {bad.reason}")
    shown = 0
    # closed here, not when collected: the session may be gone by then
    async with aclosing(reconciliation.discrepancies()) as discrepancies:
        async for item in discrepancies:
            if shown == SHOWN:
                say("         ... (all of them: --csv FILE or --json)")
                break
            say(f"  {_describe(item)}")
            shown += 1
    shown = 0
    async with aclosing(reconciliation.player_differences()) as players:
        async for player, currency, difference in players:
            if shown == SHOWN:
                say("         ... (all players: --json)")
                break
            say(f"player   {player} {currency}: wallet less ledger {difference:+,}")
            shown += 1
    verdict = "everything matches" if s.ok else f"{s.finding_count:,} discrepancies"
    say(f"result   {verdict}")


def _describe(item: Discrepancy) -> str:
    where = item.message_id or f"{item.table_id}/{item.round_id}/{item.bet_id}"
    wallet = "-" if item.wallet_amount is None else f"{item.wallet_amount:,} {item.wallet_currency}"
    ledger = "-" if item.ledger_amount is None else f"{item.ledger_amount:,} {item.ledger_currency}"
    line = f" line {item.line}" if item.line is not None else ""
    detail = f" ({item.detail})" if item.detail else ""
    return (
        f"{item.kind:<20} {item.movement:<6} {where} player {item.player_id}: "
        f"wallet {wallet}, ledger {ledger}{line}{detail}"
    )
