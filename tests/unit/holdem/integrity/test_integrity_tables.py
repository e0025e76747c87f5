"""Stored flop tables read back as the tables computed on demand, value for value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from holdem import load_paytable
from holdem.integrity import tables
from holdem.odds.combos import canonical_flops
from holdem.odds.situation import ante_multipliers

CLASSIC = load_paytable("casino-holdem/classic")
STANDARD = load_paytable("texas-holdem-plus/standard")
FLOPS = [flop for flop, _ in canonical_flops()]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory, and nothing loaded in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tables, "_CH_STORED", {})
    monkeypatch.setattr(tables, "_THP_STORED", {})
    monkeypatch.setattr(tables, "_LOOKED", set())
    tables.cache_dir().mkdir(parents=True)
    return tables.cache_dir()


def test_a_stored_texas_holdem_plus_flop_reads_as_its_table(cache: Path) -> None:
    m = ante_multipliers(STANDARD)
    flop = FLOPS[700]
    _, arrays = tables._open_thp(m, 1)
    tables._store_thp_flop(m, flop, arrays, 0)
    stored = tables._ThpStored({flop: 0}, m, arrays)
    table = tables.thp_flop_table(m, flop)
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
