"""``croupier integrity``: is the game fair? The integrity z-scores of a period, from the ledger.

For every round settled in the period (by the time the ledger recorded it), the deal value
and the play residual (:mod:`holdem.integrity.terms`), summed per game, pay table and
currency, each with its z-score. The ledger is read once; Texas Hold'em Plus situations are
then computed flop by flop, each flop's exact table once, so a busy day costs at most one
table per distinct flop. Exit 1 when a z-score is beyond the alert threshold (|z| > 4 with
at least 1,000 rounds), as the alerts have it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final

from croupier.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.errors import CommandError, ExitCode
from croupier.integrity import NoCards, PreparedRound, prepare_settled
from croupier.ledger import Ledger
from croupier.progress import Progress
from croupier.round import SETTLED
from holdem import Game
from holdem.integrity.tables import forget_prefetched, prefetch_thp
from holdem.integrity.terms import Terms, calculator, thp_keys

THRESHOLD: Final = 4.0
MIN_ROUNDS: Final = 1_000
PAGE: Final = 2_000


def register(subparsers: Any) -> None:
    """Add the ``integrity`` sub-command."""
    parser = subparsers.add_parser(
        "integrity",
        help="is the game fair? deal value and play residual z-scores of a period",
        description=(
            "Deal value: the best-play value of the cards dealt against a fair shoe (moves only "
            "when the cards favour one side). Play residual: what the bets returned against "
            "the exact expectation of the decisions taken (moves only when the cards after the "
            "decisions or the payments are not fair). Exit 1 when |z| > 4 with at least "
            "1,000 rounds."
        ),
    )
    add_ledger_argument(parser)
    parser.add_argument(
        "--from",
        dest="start",
        type=_moment,
        help="first settlement time counted, UTC: 2026-12-01 or 2026-12-01T06:00 "
        "(default: the ledger's start)",
    )
    parser.add_argument(
        "--to",
        dest="end",
        type=_moment,
        help="settlement time the period ends before, UTC (default: now)",
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: write 2026-12-01 or 2026-12-01T06:00 (UTC)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run(args: argparse.Namespace) -> int:
    """Print the figures; 1 when a z-score is beyond the threshold."""
    if args.start and args.end and args.start >= args.end:
        raise CommandError("--from must be before --to", "give a period that is not empty")
    report = asyncio.run(_integrity(ledger_of(args), args.start, args.end))
    if args.json:
        print_json(report)
    else:
        print(_text(report))
    return ExitCode.FINDING if report["findings"] else ExitCode.OK


async def _integrity(url: str, start: datetime | None, end: datetime | None) -> dict[str, Any]:
    async with ledger_at(url) as ledger:
        rounds, no_cards = await _read(ledger, start, end)
    _prefetch(rounds)
    totals: dict[tuple[str, str, str], Terms] = {}
    with Progress("integrity: rounds", "rounds", len(rounds)) as progress:
        for prepared in progress.track(rounds):
            labels = prepared.labels
            totals[labels] = totals.get(labels, Terms()) + prepared.terms()
    forget_prefetched()
    return _report(totals, no_cards, start, end)


async def _read(
    ledger: Ledger, start: datetime | None, end: datetime | None
) -> tuple[list[PreparedRound], int]:
    rounds: list[PreparedRound] = []
    no_cards = 0
    total = await ledger.last_position()
    at = 0
    with Progress("integrity: ledger", "events", total) as progress:
        while at < total:
            page = await ledger.read_all(at, min(PAGE, total - at))
            if not page:
                break
            for record in page:
                if record.type != SETTLED:
                    continue
                if (start and record.recorded_at < start) or (end and record.recorded_at >= end):
                    continue
                try:
                    rounds.extend(prepare_settled(record.data))
                except NoCards:
                    no_cards += 1
            at = page[-1].position
            progress.advance(len(page))
    return rounds, no_cards


def _prefetch(rounds: Iterable[PreparedRound]) -> None:
    """Every Texas Hold'em Plus situation, flop by flop (each flop's table once)."""
    wanted: dict[tuple[int, ...], list[Any]] = {}
    for prepared in rounds:
        if prepared.table.game is Game.TEXAS_HOLDEM_PLUS:
            multipliers = calculator(prepared.table).multipliers
            wanted.setdefault(multipliers, []).extend(thp_keys(prepared.round))
    for multipliers, keys in wanted.items():
        flops = len({flop for flop, _, _ in keys})
        with Progress("integrity: Texas Hold'em Plus flops", "flops", flops) as progress:
            prefetch_thp(multipliers, keys, lambda done, _: progress.advance(1))


def _report(
    totals: dict[tuple[str, str, str], Terms],
    no_cards: int,
    start: datetime | None,
    end: datetime | None,
) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    findings: list[str] = []
    for (game, paytable, currency), t in sorted(totals.items()):
        entry: dict[str, Any] = {
            "game": game,
            "paytable": paytable,
            "currency": currency,
            "rounds": t.rounds,
            "deal": {
                "value": round(t.deal_value, 3),
                "expected": round(t.deal_mean, 3),
                "variance": round(t.deal_variance, 3),
                "z": round(t.deal_z, 4),
            },
            "play": {
                "returned": t.play_actual,
                "expected": round(t.play_expected, 3),
                "variance": round(t.play_variance, 3),
                "z": round(t.play_z, 4),
            },
        }
        entries.append(entry)
        for figure in ("deal", "play"):
            if t.rounds >= MIN_ROUNDS and abs(entry[figure]["z"]) > THRESHOLD:
                findings.append(f"{paytable} {currency}: {figure} z = {entry[figure]['z']:+.2f}")
    return {
        "from": start.isoformat() if start else None,
        "to": end.isoformat() if end else None,
        "threshold": THRESHOLD,
        "min_rounds": MIN_ROUNDS,
        "paytables": entries,
        "rounds_without_cards": no_cards,
        "findings": findings,
    }


def _text(report: dict[str, Any]) -> str:
    period = f"{report['from'] or 'the start'} to {report['to'] or 'now'}"
    lines = [
        f"Game integrity, rounds settled from {period} (amounts in minor units)",
        f"{'pay table':<28} {'currency':<8} {'rounds':>10} {'deal z':>8} {'play z':>8}",
    ]
    for e in report["paytables"]:
        lines.append(
            f"{e['paytable']:<28} {e['currency']:<8} {e['rounds']:>10,} "
            f"{e['deal']['z']:>+8.2f} {e['play']['z']:>+8.2f}"
        )
    if not report["paytables"]:
        lines.append("no settled rounds in the period")
    lines.append(
        "deal z: the cards dealt against a fair shoe; play z: returns against the exact "
        "expectation of the decisions taken. Beyond ±4 with 1,000 rounds: not fair."
    )
    if report["rounds_without_cards"]:
        lines.append(f"{report['rounds_without_cards']} settlements recorded without their cards")
    lines += [f"FINDING {f}" for f in report["findings"]]
    return "\n".join(lines)
