"""Stored flop tables read back as the tables computed on demand, value for value."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

import numpy as np
import pytest

from holdem import load_paytable
from holdem.integrity import tables
from holdem.odds.combos import canonical_flops
from holdem.odds.situation import ante_multipliers
from holdem.odds.sweep import flop_sums

CLASSIC = load_paytable("casino-holdem/classic")
STANDARD = load_paytable("texas-holdem-plus/standard")
FLOPS = [flop for flop, _ in canonical_flops()]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory, and nothing loaded in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tables, "_CH_STORED", {})
    monkeypatch.setattr(tables, "_THP_STORED", {})
    monkeypatch.setattr(tables, "_LOOKED", {})
    tables.cache_dir().mkdir(parents=True)
    return tables.cache_dir()


def test_a_stored_texas_holdem_plus_flop_reads_as_its_table(cache: Path) -> None:
    m = ante_multipliers(STANDARD)
    flop = FLOPS[700]
    _, arrays = tables._open_thp(m, 1)
    table = tables.thp_flop_table(m, flop)  # by category, summed in numpy
    _, (sums,) = flop_sums(flop, False, [m])  # summed in the compiled sweep, as stored
    tables._store_thp_flop(sums, arrays, 0)
    stored = tables._ThpStored({flop: 0}, m, arrays)
    for row, turn in [(0, 0), (17, 46), (1175, 23), (600, 5)]:
        got = stored.situation(flop, row, turn)
        want = tables._thp_situation(m, table, row, turn)
        assert (got.flop, got.after) == (want.flop, want.after)
        assert (got.won, got.lost, got.paid, got.paid_square) == (
            want.won,
            want.lost,
            want.paid,
            want.paid_square,
        )
        assert got.spread == pytest.approx(want.spread, rel=1e-12, abs=1e-15)
        wins = table.wins[row, turn]
        assert got.paid == int(wins @ np.asarray(m)) and got.won == int(wins.sum())


def test_stored_casino_holdem_tables_are_read_on_first_use(cache: Path) -> None:
    m = ante_multipliers(CLASSIC)
    assert tables.load(ch=[m]) == [f"Casino Hold'em {m}"]  # nothing stored yet
    computed = tables._ch_flop_table(m, FLOPS[3])
    ev = np.zeros((len(FLOPS), 1176), dtype=np.int64)
    second = np.zeros_like(ev)
    ev[3], second[3] = computed.ev, computed.second
    ev[4] = 7  # a value the computation never gives: proves the file is what is read
    tables._store(tables._ch_path(m), ev=ev, second=second)
    tables._LOOKED.clear()
    got = tables.ch_flop_table(m, FLOPS[3])
    assert np.array_equal(got.ev, computed.ev) and np.array_equal(got.second, computed.second)
    assert set(tables.ch_flop_table(m, FLOPS[4]).ev) == {7}
    assert tables.load(ch=[m]) == []


def test_a_process_that_finds_the_tables_being_built_waits_and_reads_them(cache: Path) -> None:
    m = ante_multipliers(CLASSIC)
    waiting = threading.Event()
    failed: list[BaseException] = []

    def prepare() -> None:
        try:
            tables.prepare(ch=[m], waiting=waiting.set)
        except BaseException as error:  # reported by the test below
            failed.append(error)

    with open(cache / "integrity-build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another builder holds the lock
        other = threading.Thread(target=prepare)
        other.start()
        assert waiting.wait(30), "prepare did not wait for the build lock"
        # What the other builder stores: 7 is no value a build gives, so reading it back
        # proves the waiting process read the stored file instead of building its own.
        sevens = np.full((len(FLOPS), 1176), 7, dtype=np.int64)
        tables._store(tables._ch_path(m), ev=sevens, second=sevens)
        fcntl.flock(lock, fcntl.LOCK_UN)
    other.join(60)
    assert not other.is_alive() and not failed
    assert set(tables.ch_flop_table(m, FLOPS[9]).ev) == {7}


def test_a_running_process_reads_tables_stored_after_it_first_looked(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = ante_multipliers(CLASSIC)
    computed = tables._ch_flop_table(m, FLOPS[5])
    assert np.array_equal(tables.ch_flop_table(m, FLOPS[5]).ev, computed.ev)  # not stored
    sevens = np.full((len(FLOPS), 1176), 7, dtype=np.int64)
    tables._store(tables._ch_path(m), ev=sevens, second=sevens)  # built by another process
    assert np.array_equal(tables.ch_flop_table(m, FLOPS[5]).ev, computed.ev)  # looked lately
    looked = tables._LOOKED[("ch", m)]
    monkeypatch.setitem(tables._LOOKED, ("ch", m), looked - tables.LOOK_AGAIN)
    assert set(tables.ch_flop_table(m, FLOPS[5]).ev) == {7}
