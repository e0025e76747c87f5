"""Every path a settlement result takes does work linear in the size of its round.

A shared hand of N players and one of 2N are settled, relayed, verified and set aside and
redriven (``croupier redrive --results --dry-run``); a page of N dead letters and one of 2N
are relayed and verified. Work is counted, not timed: the result bodies built (each path
builds each result once), the characters of facts hashed, and the Python function calls
made. Doubling the round at most doubles each (with room for fixed costs); a path that
re-derives the round per message or re-reads it per page would quadruple them.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from croupier.bus import DEAD_LETTER_EXCHANGE
from croupier.bus.memory import MemoryBus
from croupier.cli import main
from croupier.ledger import THROUGH_ALL, Ledger, OutboxMessage, batch, chain, open_ledger
from croupier.ledger.signing import PRIVATE_KEY_FILE, LedgerKey
from croupier.metrics import Metrics
from croupier.settlement import results, settler
from croupier.settlement.deadletters import LETTERS
from croupier.settlement.relay import OutboxRelay
from croupier.settlement.settler import Inbound, Settler
from studio import StudioConfig, TableSpec, simulate

PLAYERS = 500
#: Relay pages far smaller than the round, so a per-page cost in the round's size shows.
PAGE = 50
#: Work for 2N over work for N: 2 for linear work, 4 for quadratic; this leaves room for
#: fixed costs and still fails anything quadratic.
DOUBLING = 2.6


@dataclass
class Work:
    """What one path did."""

    bodies: int = 0  # settlement result bodies built
    hashed: int = 0  # characters of facts hashed
    calls: int = 0  # Python function calls


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch, work: Work | None = None) -> Iterator[Work]:
    """Count the work done inside the block (function calls: of this thread)."""
    work = work or Work()
    build, digest = results.result_bodies, chain.row_hash
    chunks = settler.decided_result_chunks

    def bodies(closed: Any) -> list[dict[str, Any]]:
        built = build(closed)
        work.bodies += len(built)
        return built

    def decided(*args: Any) -> Iterator[list[OutboxMessage]]:
        for chunk in chunks(*args):  # bodies written with their text (settler, relay)
            work.bodies += len(chunk)
            yield chunk

    def hashed(prev: str, position: int, stream: str, version: int, *rest: str) -> str:
        work.hashed += len(rest[1])  # the fact's data
        return digest(prev, position, stream, version, *rest)

    with monkeypatch.context() as patch:
        patch.setattr(results, "result_bodies", bodies)
        patch.setattr(settler, "decided_result_chunks", decided)
        patch.setattr(results, "decided_result_chunks", decided)
        patch.setattr(chain, "row_hash", hashed)
        patch.setattr(batch, "row_hash", hashed)
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            yield work
        finally:
            profiler.disable()
    work.calls += sum(entry.callcount for entry in profiler.getstats())


def counted_cli(monkeypatch: pytest.MonkeyPatch, work: Work, argv: list[str]) -> int:
    """``croupier ARGV`` (in a worker thread: it runs its own event loop), its work counted."""
    with counting(monkeypatch, work):
        return main(argv)


def shared_hand(players: int) -> list[bytes]:
    table = TableSpec("linear", "casino-holdem/classic", players=players)
    return [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=11))]


async def settle(ledger: Ledger, lines: list[bytes], size: int = 1000) -> None:
    settler = Settler(ledger, dead_letters=True)
    for start in range(0, len(lines), size):
        page = lines[start : start + size]
        await settler.handle([Inbound(b, n, "t.feed", f"m{start + n}") for n, b in enumerate(page)])


async def relay(ledger: Ledger) -> int:
    bus = MemoryBus()
    got: set[str] = set()
    bus.subscribe("#", lambda message: got.add(message.message_id))
    outbox = OutboxRelay(ledger, bus, Metrics(), batch=PAGE)
    assert await outbox.hold()
    await outbox.drain(timeout=120)
    return len(got) + len(bus.dead_letters)


async def verify(ledger: Ledger, key: LedgerKey) -> None:
    report = await ledger.verify(
        public_key=key.public,
        outbox_rule=results.outbox_rule,
        unruled=(DEAD_LETTER_EXCHANGE,),
        letter_rule=LETTERS,
    )
    assert report.ok, report.summary()


@dataclass
class Paths:
    """The work of each path for one round."""

    settle: Work
    relay: Work
    verify: Work
    redrive: Work
    players: int


Measure = Callable[[int], Awaitable[Paths]]


@pytest.fixture
def measure_shared_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Measure:
    async def measure(players: int) -> Paths:
        folder = tmp_path / str(players)
        key = LedgerKey.generate()
        key.write(folder)
        monkeypatch.setenv("CROUPIER_LEDGER_SIGNING_KEY", str(folder / PRIVATE_KEY_FILE))
        url = f"sqlite:///{folder / 'ledger.db'}"
        lines = shared_hand(players)
        async with open_ledger(url, key) as ledger:
            await ledger.migrate()
            await settle(ledger, lines[:-1])
            with counting(monkeypatch) as settled:
                await settle(ledger, lines[-1:])
            await _set_aside_everything(url, key, players)
            capsys.readouterr()
            redriven = Work()
            argv = ["redrive", "--results", "--dry-run", "--json", "--ledger", url]
            code = await asyncio.to_thread(counted_cli, monkeypatch, redriven, argv)
            listed = json.loads(capsys.readouterr().out)
            assert code == 0, listed
            assert listed["counts"]["would redrive"] == players
            # set aside by another process: this one relays them all the same
            with counting(monkeypatch) as relayed:
                assert await relay(ledger) == players
            with counting(monkeypatch) as verified:
                await verify(ledger, key)
        return Paths(settled, relayed, verified, redriven, players)

    return measure


async def _set_aside_everything(url: str, key: LedgerKey, players: int) -> None:
    """Every result set aside by another process (a broker refused them all there), for
    ``redrive --results`` to publish."""
    async with open_ledger(url, key) as ledger:
        rows = await ledger._outbox_after(0, 10 * players, THROUGH_ALL)
        await ledger.set_aside({row.message_id: "unroutable: test" for row in rows})


def _doubles_at_most(small: Work, large: Work, path: str) -> None:
    for what in ("hashed", "calls"):
        n, two_n = getattr(small, what), getattr(large, what)
        assert two_n <= DOUBLING * max(n, 1), f"{path}: {what} {n:,} for N, {two_n:,} for 2N"


async def test_a_shared_hand_is_settled_relayed_verified_and_redriven_in_linear_work(
    measure_shared_hand: Measure,
) -> None:
    small, large = await measure_shared_hand(PLAYERS), await measure_shared_hand(2 * PLAYERS)
    for paths in (small, large):
        # each path builds each player's result once
        assert paths.settle.bodies == paths.players
        assert paths.relay.bodies == paths.players
        assert paths.verify.bodies == paths.players
        assert paths.redrive.bodies == paths.players
    for path in ("settle", "relay", "verify", "redrive"):
        _doubles_at_most(getattr(small, path), getattr(large, path), path)


async def test_dead_letters_are_relayed_and_verified_in_linear_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def measure(count: int) -> tuple[Work, Work, Work]:
        key = LedgerKey.generate()
        async with open_ledger(f"sqlite:///{tmp_path / f'{count}.db'}", key) as ledger:
            await ledger.migrate()
            garbage = [f'{{"not a feed event": {n}}}'.encode() for n in range(count)]
            with counting(monkeypatch) as settled:
                await settle(ledger, garbage)
            with counting(monkeypatch) as relayed:
                assert await relay(ledger) == count
            with counting(monkeypatch) as verified:
                await verify(ledger, key)
        return settled, relayed, verified

    small, large = await measure(PLAYERS), await measure(2 * PLAYERS)
    for path, n, two_n in zip(("settle", "relay", "verify"), small, large, strict=True):
        _doubles_at_most(n, two_n, f"dead letters, {path}")


async def test_what_this_process_settled_is_relayed_without_deriving_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service hands the relay what its settler wrote (``OutboxRelay.committed``): the
    relay publishes it as written, building no result body, reading back and hashing
    nothing (tests/unit/croupier/test_relay.py: lease or not, exactly once)."""
    key = LedgerKey.generate()
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", key) as ledger:
        await ledger.migrate()
        bus = MemoryBus()
        got: set[str] = set()
        bus.subscribe("#", lambda message: got.add(message.message_id))
        outbox = OutboxRelay(ledger, bus, Metrics(), batch=PAGE)
        settling = Settler(ledger, dead_letters=True)
        lines = shared_hand(PLAYERS)
        assert await outbox.hold()
        for start in range(0, len(lines), 1000):
            page = lines[start : start + 1000]
            inbound = [Inbound(b, n, "t.feed", f"m{start + n}") for n, b in enumerate(page)]
            outbox.committed((await settling.handle(inbound)).outbox)
        with counting(monkeypatch) as relayed:
            await outbox.drain(timeout=120)
        assert len(got) == PLAYERS
        assert relayed.bodies == 0
        assert relayed.hashed == 0
