"""``croupier par`` and ``croupier odds``."""

from __future__ import annotations

import json

import pytest

from croupier.cli import main


def test_par_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["par", "casino-holdem/classic", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["paytable"]["id"] == "casino-holdem/classic"
    assert round(doc["figures"]["base"]["rtp_percent"], 2) == 97.84


def test_par_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["par", "texas-holdem-plus/standard"]) == 0
    out = capsys.readouterr().out
    assert "RTP" in out and "preflop" in out


def test_odds_casino_holdem(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["odds", "--paytable", "casino-holdem/classic", "--player", "AsKd", "--flop", "Qh7c2s"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["best"] == "call"
    assert doc["completions"] == 1_070_190
    counts = doc["counts"]
    total = sum(counts["dealer_does_not_qualify"].values()) + sum(counts["win"].values())
    assert total + counts["tie"] + counts["loss"] == 1_070_190


@pytest.mark.parametrize(
    "extra",
    [[], ["--flop", "Qh7c2s"], ["--flop", "Qh7c2s", "--turn", "3d", "--flop-bet"]],
)
def test_odds_texas_holdem_plus(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["odds", "--paytable", "texas-holdem-plus/standard", "--player", "AsKd", *extra]
    assert main(args) == 0
    assert "EV(" in capsys.readouterr().out


def test_odds_bad_cards(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["odds", "--paytable", "casino-holdem/classic", "--player", "AsAs", "--flop", "Qh7c2s"]
    assert main(args) == 2
    assert "only once" in capsys.readouterr().err
