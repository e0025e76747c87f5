"""The books re-checked from the ledger: a settled feed balances; each broken invariant is named."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from croupier.cli import main
from croupier.ledger import Ledger, RecordedEvent, open_ledger
from croupier.reports.audit import BooksAudit, round_problems
from croupier.settlement.meters import METER_MOVED
from croupier.settlement.replay import replay
from croupier.settlement.round import SETTLED
from studio.config import StudioConfig, every_paytable
from studio.feed import simulate

METER = "jackpot:casino-holdem/progressive:EUR"
SEED = 5_000_000  # the progressive pay table's seed


async def _everything(ledger: Ledger) -> list[RecordedEvent]:
    events: list[RecordedEvent] = []
    while page := await ledger.read_all(events[-1].position if events else 0, 500):
        events.extend(page)
    return events


async def test_a_settled_studio_feed_balances_and_its_meters_are_continuous(
    tmp_path: Path,
) -> None:
    config = StudioConfig(every_paytable(players=8), rounds=120, seed=7, side_bet_rate=1.0)
    lines = [message.body + b"\n" for message in simulate(config)]
    async with open_ledger(f"sqlite:///{tmp_path / 'books.db'}") as ledger:
        await ledger.migrate()
        await replay(lines, ledger, io.StringIO(), io.StringIO())
        audit = BooksAudit()
        audit.read(await _everything(ledger))
    assert audit.report.ok, audit.report.problems
    assert audit.report.rounds == 120
    assert audit.report.movements > 0  # the progressive table's rounds moved its meter


def _fact(position: int, type_: str, data: dict[str, Any], stream: str) -> RecordedEvent:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return RecordedEvent(position, stream, position, type_, data, f"k{position}", at, "", "")


def _settled(postings: list[tuple[str, int]]) -> dict[str, Any]:
    results = [
        {"player_id": "p1", "currency": "EUR", "stake": 300, "returned": 600},
        {"player_id": "p2", "currency": "EUR", "stake": 100, "returned": 0},
    ]
    lines = [{"currency": "EUR", "account": a, "amount": v} for a, v in postings]
    return {"results": results, "postings": lines}


BALANCED = [("escrow", -400), ("player:p1", 600), ("player:p2", 0), ("house", -200)]


def test_a_balanced_round_has_no_problems() -> None:
    assert round_problems(_settled(BALANCED)) == []


def test_postings_that_do_not_sum_to_zero_are_named() -> None:
    problems = round_problems(_settled([*BALANCED[:3], ("house", -100)]))
    assert problems == ["EUR postings sum to 100, not 0"]


def test_an_escrow_that_is_not_the_stakes_is_named() -> None:
    problems = round_problems(
        _settled([("escrow", -500), ("player:p1", 600), ("player:p2", 0), ("house", -100)])
    )
    assert problems == ["EUR escrow posts -500; the stakes are 400"]


def test_a_player_credited_other_than_their_results_is_named() -> None:
    problems = round_problems(
        _settled([("escrow", -400), ("player:p1", 700), ("player:p2", 0), ("house", -300)])
    )
    assert problems == ["EUR player:p1 posts 700; the results return 600"]


def test_a_player_with_results_but_no_posting_is_named() -> None:
    problems = round_problems(_settled([("escrow", -400), ("player:p1", 600), ("house", -200)]))
    assert problems == ["EUR player:p2 has results but no posting"]


def _movement(before: int, contributed: int, awarded: int, after: int) -> dict[str, Any]:
    return {
        "currency": "EUR",
        "before": before,
        "contributed": contributed,
        "awarded": awarded,
        "reseeded": 0,
        "after": after,
    }


def test_a_meter_must_start_at_its_seed_and_go_on_from_its_last_level() -> None:
    audit = BooksAudit()
    audit.read(
        [
            _fact(1, METER_MOVED, _movement(SEED, 20, 0, SEED + 20), METER),
            _fact(2, METER_MOVED, _movement(SEED + 20, 20, 0, SEED + 40), METER),
            _fact(3, METER_MOVED, _movement(SEED + 99, 20, 0, SEED + 119), METER),  # a jump
            _fact(4, METER_MOVED, _movement(SEED + 119, 20, 0, SEED + 120), METER),  # bad sum
        ]
    )
    assert audit.report.movements == 4
    assert audit.report.problems == [
        f"position 3 ({METER}): meter {METER} starts at {SEED + 99}; it stood at {SEED + 40}",
        f"position 4 ({METER}): meter {METER} moves {SEED + 119} to {SEED + 120}, "
        f"its parts to {SEED + 139}",
    ]


def test_a_first_movement_off_the_seed_is_named() -> None:
    audit = BooksAudit()
    audit.read([_fact(1, METER_MOVED, _movement(1, 20, 0, 21), METER)])
    assert audit.report.problems == [
        f"position 1 ({METER}): meter {METER} starts at 1; it stood at {SEED}"
    ]


def test_closed_rounds_are_counted_and_their_problems_located() -> None:
    audit = BooksAudit()
    audit.read([_fact(9, SETTLED, _settled([*BALANCED[:3], ("house", 0)]), "round:t1:r1")])
    assert audit.report.rounds == 1 and not audit.report.ok
    assert audit.report.problems == ["position 9 (round:t1:r1): EUR postings sum to 200, not 0"]


def test_verify_runs_the_books_audit_and_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = StudioConfig(every_paytable(players=4), rounds=24, seed=3, side_bet_rate=1.0)
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(b"".join(message.body + b"\n" for message in simulate(config)))
    ledger = f"sqlite:///{tmp_path / 'books.db'}"
    out, rejected = str(tmp_path / "results.jsonl"), str(tmp_path / "rejected.jsonl")
    assert (
        main(["replay", str(feed), "--out", out, "--rejections", rejected, "--ledger", ledger]) == 0
    )
    capsys.readouterr()
    assert main(["verify", "--ledger", ledger, "--json"]) == 0
    books = json.loads(capsys.readouterr().out)["books"]
    assert (books["rounds"], books["found"], books["problems"]) == (24, 0, [])
