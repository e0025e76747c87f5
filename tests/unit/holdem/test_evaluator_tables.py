"""The evaluator's look-up tables: kept on disk and read back exactly, rebuilt from a
damaged file, and loaded without numpy (which only batch evaluation needs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from holdem import evaluator


def test_tables_read_back_from_disk_are_the_ones_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = evaluator._Tables()
    (stored,) = (tmp_path / "croupier").glob("holdem-ranks-*.marshal")
    read = evaluator._Tables()
    assert (read.flush, read.ranks, read.suits) == (built.flush, built.ranks, built.suits)
    assert (read.flush, read.ranks) == (evaluator._T.flush, evaluator._T.ranks)
    stored.write_bytes(stored.read_bytes()[:1000])  # cut short (a full disk, a crash)
    assert evaluator._Tables().ranks == built.ranks
    assert len(stored.read_bytes()) > 1000  # written whole again


def test_settling_loads_no_numpy() -> None:
    """The live service and the command line evaluate hand by hand: importing them must not
    import numpy (a tenth of a second of every start)."""
    code = (
        "import sys, croupier.cli, croupier.settlement.service, croupier.bus.routed; "
        "from holdem import evaluate; evaluate('As Ks Qs Js Ts 2c 3d'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


def test_batch_evaluation_agrees_with_hand_by_hand() -> None:
    import numpy as np

    hands = np.array([[48, 44, 40, 36, 32, 0, 5], [0, 4, 8, 12, 17, 21, 51]], dtype=np.uint8)
    strengths = evaluator.evaluate_batch(hands)
    assert [int(s) for s in strengths] == [evaluator.evaluate(list(h)).strength for h in hands]
