"""``studio simulate`` and ``croupier simulate``: one command, two entry points."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.feed import parse_event
from floor.cli import main as croupier_main
from studio.cli import main as studio_main
from studio.config import ConfigError, parse_table_specs


def test_studio_and_croupier_simulate_write_the_same_feed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--rounds", "12", "--seed", "5", "--players", "8", "--void-rate", "0.2"]
    assert studio_main([*args, "--out", str(tmp_path / "a.jsonl")]) == 0
    summary = capsys.readouterr().out
    assert croupier_main([*args, "--out", str(tmp_path / "b.jsonl")]) == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert "total: 12 rounds" in summary and "studio-4-standard:" in summary
    assert "seed 5:" in summary
    for line in (tmp_path / "a.jsonl").read_bytes().splitlines():
        parse_event(line)


def test_fault_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "feed.jsonl"
    argv = ["simulate", "--rounds", "8", "--seed", "1", "--tables", "classic:boxes=3"]
    assert studio_main([*argv, "--late-bet-rate", "1", "--out", str(out)]) == 0
    assert "faults late_bet=8" in capsys.readouterr().out
    assert (
        studio_main([*argv, "--fault-rate", "1", "--malformed-rate", "0", "--out", str(out)]) == 0
    )
    summary = capsys.readouterr().out.splitlines()[-2]
    assert "malformed=" not in summary and "wrong_call=8" in summary and "void=" not in summary


def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x.jsonl")
    assert studio_main(["simulate", "--rounds", "1", "--tables", "baccarat", "--out", out]) == 2
    assert "unknown pay table" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        studio_main(["simulate", "--rounds", "1"])  # no output given


def test_table_specs() -> None:
    tables = parse_table_specs(
        ["classic*2", "texas-holdem-plus/standard:boxes=7", "progressive:shared=500"], players=9
    )
    assert [t.table_id for t in tables] == [
        "studio-1-classic",
        "studio-2-classic",
        "studio-3-standard",
        "studio-4-progressive",
    ]
    assert [(t.players, t.boxes) for t in tables] == [(9, None), (9, None), (9, 7), (500, None)]
    with pytest.raises(ConfigError):
        parse_table_specs(["classic:boxes"])
