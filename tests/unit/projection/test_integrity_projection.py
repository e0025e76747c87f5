"""The integrity read model and ``croupier integrity`` against the settled facts themselves.

The ledger is filled by settling a studio feed through the real settler (SQLite); every
figure must equal the sum of the pure per-fact terms, whether projected in one run, in
batches killed with SIGKILL and resumed, or recomputed by the command.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from projection_suite import TABLES, settle, studio_feed

from croupier.cli.commands import integrity as integrity_command
from croupier.ledger import Ledger, open_ledger
from croupier.metrics import Metrics
from croupier.projection import open_store
from croupier.projection.integrity import (
    FIGURES,
    IntegrityProjection,
    figures_of,
    read_totals,
    row_of,
)
from croupier.projection.projector import Projector
from croupier.reports import integrity as integrity_report
from croupier.reports.integrity import (
    PreparedRound,
    prepare_settled,
    settled_terms,
    summed_terms,
)
from croupier.settlement.round import SETTLED
from holdem.integrity.terms import Terms


@pytest.fixture(scope="module")
def feed() -> list[bytes]:
    return studio_feed(rounds=40, seed=11, prefix="it", tables=(*TABLES, "standard:boxes=4"))


@pytest.fixture
async def ledger(tmp_path: Path, feed: list[bytes]) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        await settle(opened, feed)
        yield opened


async def _expected(ledger: Ledger) -> dict[tuple[str, str, str], dict[str, int]]:
    """The totals summed straight from the settled facts, as the read model stores them."""
    out: dict[tuple[str, str, str], dict[str, int]] = {}
    for record in await ledger.read_all(0, 1_000_000):
        if record.type != SETTLED:
            continue
        for t in settled_terms(record.data):
            row = out.setdefault((t.game, t.paytable, t.currency), dict.fromkeys(FIGURES, 0))
            for name, value in row_of(t.terms).items():
                row[name] += value
    return out


async def _totals(ledger: Ledger) -> dict[tuple[str, str, str], dict[str, int]]:
    async with open_store(ledger).session() as session:
        return await read_totals(session)


async def test_projected_totals_are_the_settled_facts_terms(ledger: Ledger) -> None:
    projection = IntegrityProjection()
    metrics = Metrics()
    projection.metrics = metrics
    projector = Projector(ledger, open_store(ledger), [projection], batch=37)
    await projector.setup()
    await projector.catch_up()
    expected = await _expected(ledger)
    assert await _totals(ledger) == expected
    assert {key[1] for key in expected} >= {
        "casino-holdem/classic",
        "casino-holdem/royal-20",
        "texas-holdem-plus/standard",
    }
    for labels, row in expected.items():
        assert row["rounds"] > 0 and row["deal_variance"] > 0 and row["play_variance"] > 0
        for name in FIGURES:
            counted = metrics.integrity[name].labels(*labels)._value.get()
            assert counted == pytest.approx(figures_of(row)[name], rel=1e-12)
        since = metrics.integrity_total["deal_value"].labels(*labels)._value.get()
        assert since == figures_of(row)["deal_value"]
    # Texas Hold'em Plus boxes of one round: their covariance; Casino Hold'em's is exact.
    thp = expected[("texas_holdem_plus", "texas-holdem-plus/standard", "EUR")]
    assert thp["play_covariance_positive"] > 0
    for labels, row in expected.items():
        if labels[0] == "casino_holdem":
            assert row["play_covariance_positive"] == row["play_covariance_negative"] == 0
    # Once more: nothing new, nothing counted twice.
    await projector.catch_up()
    assert await _totals(ledger) == expected


def test_a_round_s_covariance_is_stored_in_two_parts_that_never_go_down() -> None:
    up, down = row_of(Terms(play_covariance=2.4)), row_of(Terms(play_covariance=-2.6))
    assert (up["play_covariance_positive"], up["play_covariance_negative"]) == (2, 0)
    assert (down["play_covariance_positive"], down["play_covariance_negative"]) == (0, 3)
    metrics = Metrics()
    labels = ("texas_holdem_plus", "texas-holdem-plus/standard", "EUR")
    for row in (up, down):
        metrics.observe_integrity(labels, figures_of({**dict.fromkeys(FIGURES, 0), **row}))
    counted = {
        name: metrics.integrity[name].labels(*labels)._value.get()
        for name in ("play_covariance_positive", "play_covariance_negative")
    }
    assert counted == {"play_covariance_positive": 2.0, "play_covariance_negative": 3.0}


async def test_sigkill_while_projecting_resumes_with_the_same_totals(
    ledger: Ledger, tmp_path: Path
) -> None:
    expected = await _expected(ledger)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    projector = Projector(ledger, open_store(ledger), [IntegrityProjection()], batch=20)
    await projector.setup()
    head = await ledger.last_position()
    reached = 0
    for _ in range(3):  # killed three times, each time once it has committed more
        command = [sys.executable, "-m", "croupier.cli", "project", "--ledger", url]
        process = subprocess.Popen(
            [*command, "--only=integrity", "--batch", "20"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for _ in range(1200):
            (at,) = (await projector.store.checkpoints([IntegrityProjection()])).values()
            if at > reached or process.poll() is not None:
                break
            await asyncio.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        (reached,) = (await projector.store.checkpoints([IntegrityProjection()])).values()
    (at,) = (await projector.store.checkpoints([IntegrityProjection()])).values()
    assert 0 < at < head, "the projector was not killed part-way: nothing was proven"
    assert await projector.catch_up() == head
    assert await _totals(ledger) == expected


async def test_the_command_recomputes_the_period_from_the_ledger(
    ledger: Ledger, tmp_path: Path
) -> None:
    expected = await _expected(ledger)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "croupier.cli", "integrity", "--ledger", url, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    got = {(e["game"], e["paytable"], e["currency"]): e for e in report["paytables"]}
    assert got.keys() == expected.keys()
    for labels, row in expected.items():
        entry = got[labels]
        figures = figures_of(row)
        assert entry["rounds"] == row["rounds"]
        terms = Terms(
            row["rounds"],
            figures["deal_value"],
            figures["deal_expected"],
            figures["deal_variance"],
            row["play_returned"],
            figures["play_expected"],
            figures["play_variance"],
            figures["play_covariance_positive"] - figures["play_covariance_negative"],
        )
        assert entry["deal"]["z"] == pytest.approx(terms.deal_z, abs=1e-3)
        assert entry["play"]["z"] == pytest.approx(terms.play_z, abs=1e-3)
        stated = terms.play_variance + terms.play_covariance
        assert entry["play"]["variance"] == pytest.approx(stated, abs=1)
    assert report["findings"] == []
    # A period after everything holds nothing.
    later = subprocess.run(
        [sys.executable, "-m", "croupier.cli", "integrity", "--ledger", url, "--json",
         "--from", "2999-01-01"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert later.returncode == 0 and json.loads(later.stdout)["paytables"] == []
    backwards = subprocess.run(
        [sys.executable, "-m", "croupier.cli", "integrity", "--ledger", url,
         "--from", "2026-02-01", "--to", "2026-01-01"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert backwards.returncode == 2 and "--from must be before --to" in backwards.stderr


@pytest.fixture
def settled_rounds(tmp_path: Path, feed: list[bytes]) -> list[PreparedRound]:
    """The feed's settled rounds, prepared, read with no event loop left running."""

    async def read() -> list[PreparedRound]:
        async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
            await ledger.migrate()
            await settle(ledger, feed)
            records = await ledger.read_all(0, 1_000_000)
        return [p for r in records if r.type == SETTLED for p in prepare_settled(r.data)]

    return asyncio.run(read())


@pytest.mark.parametrize("workers", ["threads", "processes"])
def test_terms_summed_by_workers_equal_the_sum_round_by_round(
    settled_rounds: list[PreparedRound], monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """``summed_terms`` works chunks of rounds on a worker per core (threads, or processes
    forked for a large period) and sums them in the rounds' order: every total equals the
    one-by-one sum exactly, several-box rounds included, and the progress counts every
    round once."""
    monkeypatch.setattr(integrity_report, "TERMS_CHUNK", 7)  # many chunks for few rounds
    parent = os.getpid()
    forked = multiprocessing.get_context("fork").Value("i", 0)  # spans worked elsewhere
    if workers == "processes":
        monkeypatch.setattr(integrity_report, "PROCESSES_FROM", 1)
    work = integrity_report._span_terms

    def counted(rounds: list[PreparedRound], span: tuple[int, int]) -> list[Terms]:
        with forked.get_lock():
            forked.value += os.getpid() != parent
        return work(rounds, span)

    monkeypatch.setattr(integrity_report, "_span_terms", counted)
    rounds = settled_rounds
    assert any(len(prepared.round.boxes) > 1 for prepared in rounds)
    one_by_one: dict[tuple[str, str, str], Terms] = {}
    for prepared in rounds:
        one_by_one[prepared.labels] = one_by_one.get(prepared.labels, Terms()) + prepared.terms()
    advanced: list[int] = []
    assert summed_terms(rounds, advanced.append) == one_by_one
    assert sum(advanced) == len(rounds) and len(advanced) > 2
    assert forked.value == (len(advanced) if workers == "processes" else 0)


def _met(*ids: str) -> list[Any]:
    """Rounds as ``TablesAhead`` sees them: only their pay table counts."""
    return [SimpleNamespace(table=SimpleNamespace(id=i, version=1)) for i in ids]


def test_the_tables_are_built_while_the_rest_of_the_period_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a period's rounds are enough to need the stored tables, those of the pay
    tables met so far are built on a thread while reading goes on (the build here waits
    until a later page has been read), the interpreter switching between them more often
    meanwhile; ``finish`` waits for it, then has every table the period needs, those met
    later included. A period too short to build for starts no build. A build's failure
    is raised by ``finish``."""
    calls: list[tuple[list[str], bool, bool]] = []
    gate = threading.Event()
    switch = sys.getswitchinterval()

    def prepare(paytables: Any, build: bool = True, advance: Any = None) -> None:
        calls.append((list(dict.fromkeys(t.id for t in paytables)), build, advance is not None))
        if advance is not None:
            assert gate.wait(10), "reading did not go on while the tables were built"
            advance()

    monkeypatch.setattr(integrity_command, "prepare_tables", prepare)
    monkeypatch.setattr(integrity_command, "BUILD_FROM", 3)
    ahead = integrity_command.TablesAhead()
    rounds = _met("a", "b")
    ahead.see(rounds)
    assert calls == []  # too few rounds yet
    rounds += _met("a")
    ahead.see(rounds)
    ahead.see(rounds)  # once only
    rounds += _met("c")  # a later page, read while the build runs
    ahead.see(rounds)
    assert sys.getswitchinterval() == integrity_command.SHARED_SWITCH  # build and read share
    gate.set()
    ahead.finish(rounds)
    assert calls == [(["a", "b"], True, True), (["a", "b", "c"], True, False)]
    assert sys.getswitchinterval() == switch  # restored once the build is done

    calls.clear()
    short = integrity_command.TablesAhead()
    short.see(_met("a"))
    short.finish(_met("a"))
    assert calls == [(["a"], False, False)]

    def broken(paytables: Any, build: bool = True, advance: Any = None) -> None:
        if advance is not None:
            raise OSError("no room for the tables")

    monkeypatch.setattr(integrity_command, "prepare_tables", broken)
    failing = integrity_command.TablesAhead()
    failing.see(_met("a", "b", "c"))
    with pytest.raises(OSError, match="no room"):
        failing.finish(_met("a", "b", "c"))
