"""``croupier integrity``: is the game fair? The integrity z-scores of a period, from the ledger.

For every round settled in the period (by the time the ledger recorded it), the deal value
and the play residual (:mod:`holdem.integrity.terms`), summed per game, pay table and
currency, each with its z-score. The ledger is read once; every exact value comes from the
stored flop tables (:mod:`holdem.integrity.tables`), built on first use (under a minute of
CPU, once per machine: those of the pay tables met in the first :data:`BUILD_FROM` rounds
while the rest of the period is read, with a progress display for what is left; a period of
fewer rounds computes its flops on demand instead; several processes at once build them
once, the others waiting) or beforehand by ``croupier integrity --tables`` (``make
integrity-tables``). Exit 1 when a z-score is beyond the alert threshold (|z| > 4 with at
least 1,000 rounds), as the alerts have it. The play residual's ``variance`` (JSON)
is the one its z-score reads: the boxes' exact variances plus ``covariance``, the boxes'
covariance estimated from their residuals (Texas Hold'em Plus rounds of several boxes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.cli.progress import Progress
from croupier.errors import CommandError, ExitCode
from croupier.ledger import Ledger
from croupier.reports.integrity import NoCards, PreparedRound, prepare_settled, summed_terms
from croupier.settlement.round import SETTLED
from holdem import Game, PayTable, load_paytable, paytable_ids
from holdem.integrity import tables
from holdem.integrity.terms import Terms
from holdem.odds.situation import ante_multipliers

THRESHOLD: Final = 4.0
MIN_ROUNDS: Final = 1_000
PAGE: Final = 2_000
#: From this many rounds, building the stored tables (every flop once, under a minute) is
#: quicker than computing each round's flop on demand (a few hundredths of a second each).
BUILD_FROM: Final = 2_000
FLOPS: Final = 1_755
#: The interpreter's switch interval (s) while the tables are built beside the reading: the
#: build's threads get the lock back within it to hand each flop's sweep on (at the default
#: 5 ms the reading thread starved them).
SHARED_SWITCH: Final = 0.0005
BUILDING: Final = "integrity: building the exact tables once"


def register(subparsers: Any) -> None:
    """Add the ``integrity`` sub-command."""
    parser = subparsers.add_parser(
        "integrity",
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
    parser.add_argument(
        "--tables",
        action="store_true",
        help="build and store the exact tables of every pay table (under a minute, once per "
        "machine; "
        f"kept in {tables.cache_dir()}), then exit",
    )
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
    if args.tables:
        prepare_tables([load_paytable(name) for name in paytable_ids()])
        print(f"integrity tables stored in {tables.cache_dir()}")
        return ExitCode.OK
    if args.start and args.end and args.start >= args.end:
        raise CommandError("--from must be before --to", "give a period that is not empty")
    report = _integrity(ledger_of(args), args.start, args.end)
    if args.json:
        print_json(report)
    else:
        print(_text(report))
    return ExitCode.FINDING if report["findings"] else ExitCode.OK


def _integrity(url: str, start: datetime | None, end: datetime | None) -> dict[str, Any]:
    ahead = TablesAhead()
    try:
        rounds, no_cards = asyncio.run(_read_period(url, start, end, ahead))
        ahead.finish(rounds)  # the event loop closed: the terms may fork their workers
        with Progress("integrity: rounds", "rounds", len(rounds)) as progress:
            totals = summed_terms(rounds, progress.advance)
    finally:
        ahead.wait()
        gc.unfreeze()
    return _report(totals, no_cards, start, end)


async def _read_period(
    url: str, start: datetime | None, end: datetime | None, ahead: TablesAhead
) -> tuple[list[PreparedRound], int]:
    async with ledger_at(url) as ledger:
        return await _read(ledger, start, end, ahead)


async def _read(
    ledger: Ledger, start: datetime | None, end: datetime | None, ahead: TablesAhead
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
            ahead.see(rounds)
            # What was read is kept to the end: frozen, the collector does not walk it again
            # on each page (a day's rounds are millions of objects).
            gc.freeze()
    return rounds, no_cards


def prepare_tables(
    paytables: Iterable[PayTable], build: bool = True, advance: Callable[[], None] | None = None
) -> None:
    """Load the stored tables of these pay tables; build what is missing, with a progress
    display, or calling ``advance`` after each flop when given."""
    by_game: dict[Game, set[tuple[int, ...]]] = {game: set() for game in Game}
    for table in {(t.id, t.version): t for t in paytables}.values():
        by_game[table.game].add(ante_multipliers(table))
    ch, thp = by_game[Game.CASINO_HOLDEM], by_game[Game.TEXAS_HOLDEM_PLUS]
    if not tables.load(ch, thp) or not build:
        return
    if advance is not None:
        tables.prepare(ch, thp, lambda done, _: advance(), _waiting)
        return
    with Progress(BUILDING, "flops", FLOPS) as progress:
        tables.prepare(ch, thp, lambda done, _: progress.advance(1), _waiting)


class TablesAhead:
    """The stored tables of the pay tables met in a period's first :data:`BUILD_FROM`
    rounds, built on a thread while the rest of the period is read: the flop sweeps run
    outside the interpreter's lock, on the core that reading leaves idle. On a fresh
    machine the build is most of a day's wait; where the tables are stored, this only
    loads them early.

    ``see`` after each page read; ``finish`` once the period is read (waits for the
    build with a progress display, then loads or builds what else the period needs);
    ``wait`` on the way out in any case.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._flops = 0
        self._switch = sys.getswitchinterval()

    def see(self, rounds: Sequence[PreparedRound]) -> None:
        """Start the build once ``rounds`` are enough to need the tables (once only)."""
        if self._thread is not None or len(rounds) < BUILD_FROM:
            return
        paytables = list({(r.table.id, r.table.version): r.table for r in rounds}.values())
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(SHARED_SWITCH)
        self._thread = threading.Thread(
            target=self._build, args=(paytables,), name="integrity-tables", daemon=True
        )
        self._thread.start()

    def finish(self, rounds: Sequence[PreparedRound]) -> None:
        """Wait for the build started early (raising what failed it), then have every table
        ``rounds`` need."""
        if self._thread is not None and self._thread.is_alive():
            with Progress(BUILDING, "flops", FLOPS) as progress:
                while self._thread.is_alive():
                    self._thread.join(0.25)
                    progress.advance(self._flops - progress.done)
        self.wait()
        if self._error is not None:
            raise self._error
        prepare_tables((r.table for r in rounds), build=len(rounds) >= BUILD_FROM)

    def wait(self) -> None:
        """Wait for a build in flight to end: a table is stored whole or not at all."""
        if self._thread is not None:
            self._thread.join()
            sys.setswitchinterval(self._switch)

    def _build(self, paytables: Sequence[PayTable]) -> None:
        try:
            prepare_tables(paytables, advance=self._advanced)
        except BaseException as error:  # raised in the reading thread, by finish
            self._error = error

    def _advanced(self) -> None:
        self._flops += 1


def _waiting() -> None:
    print(
        "integrity: another process is building the exact tables; waiting to read them",
        file=sys.stderr,
        flush=True,
    )


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
                "variance": round(t.play_variance + t.play_covariance, 3),
                "covariance": round(t.play_covariance, 3),
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
