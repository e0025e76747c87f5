"""The shared conventions: masked URLs, progress, ``--json``, ``--version``, one ledger
default for every command."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from croupier.cli.progress import Progress
from croupier.urls import mask_secrets, mask_url, parse_ledger_url
from floor.cli import main


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:***@127.0.0.1:5672/"),
        ("postgresql://app:p%40ss@db:5432/croupier", "postgresql://app:***@db:5432/croupier"),
        ("postgresql://postgres@db/croupier", "postgresql://postgres@db/croupier"),
        ("amqps://u:pw@h", "amqps://u:***@h"),
        (
            "cannot reach 'amqp://a:b@h1/' nor postgres://c:d@h2/x today",
            "cannot reach 'amqp://a:***@h1/' nor postgres://c:***@h2/x today",
        ),
        ("sqlite:///var/croupier.sqlite", "sqlite:///var/croupier.sqlite"),
        ("no url here: a:b@c", "no url here: a:b@c"),
    ],
)
def test_passwords_in_urls_are_masked(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


def test_a_url_without_password_is_unchanged() -> None:
    assert mask_url("amqp://127.0.0.1/") == "amqp://127.0.0.1/"


def test_sqlite_urls_three_slashes_relative_four_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_ledger_url("sqlite:///tmp/x.db").path == tmp_path / "tmp" / "x.db"
    assert parse_ledger_url("sqlite:////tmp/x.db").path == Path("/tmp/x.db")
    assert parse_ledger_url("sqlite:///:memory:").path is None


def test_progress_is_quiet_off_a_terminal_and_sums_up_at_the_end() -> None:
    stream = io.StringIO()
    with Progress("replay", "events", 10, stream=stream) as progress:
        for _ in progress.track(range(10)):
            pass
    assert "\r" not in stream.getvalue()
    assert stream.getvalue().startswith("replay: 10 events in ")
    assert stream.getvalue().count("\n") == 1


def test_progress_on_a_terminal_shows_rate_and_eta() -> None:
    now = [0.0]
    stream = io.StringIO()
    with Progress("verify", "rows", 1000, stream=stream, live=True, clock=lambda: now[0]) as p:
        now[0] = 2.0
        p.advance(250)
        assert "verify: 250/1,000 rows (25%), 125/s, ETA 6.0s" in stream.getvalue()
        now[0] = 4.0
        p.advance(750)
    assert stream.getvalue().endswith("verify: 1,000 rows in 4.0s (250/s)\n")


def test_no_summary_when_the_work_failed() -> None:
    stream = io.StringIO()
    with pytest.raises(RuntimeError), Progress("x", "items", stream=stream):
        raise RuntimeError
    assert stream.getvalue() == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("croupier 0.")


def test_help_texts_show_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    assert "(default: 1000)" in capsys.readouterr().out
    assert main(["replay", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "default: CROUPIER_DATABASE_URL, now postgresql://" in help_text


def test_replay_verify_and_migrate_use_the_same_ledger_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CROUPIER_DATABASE_URL", "sqlite:///ledger/one.db")
    feed = tmp_path / "feed.jsonl"
    assert main(["simulate", "--rounds", "4", "--seed", "1", "--out", str(feed)]) == 0
    capsys.readouterr()
    assert main(["migrate", "--json"]) == 0
    assert "0001_ledger.sql" in json.loads(capsys.readouterr().out)["applied"]
    assert main(["replay", str(feed), "--out", "o.jsonl", "--rejections", "r.jsonl"]) == 0
    capsys.readouterr()
    assert main(["verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["checked"] >= len(feed.read_text().splitlines())
    assert [p.name for p in (tmp_path / "ledger").iterdir() if p.suffix == ".db"] == ["one.db"]


def test_json_output_of_every_command_a_program_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    ledger = ["--ledger", "sqlite:///l.db"]
    commands = [
        ["simulate", "--rounds", "3", "--seed", "2", "--out", "feed.jsonl", "--json"],
        ["replay", "feed.jsonl", "--out", "o", "--rejections", "r", *ledger, "--json"],
        ["verify", *ledger, "--json"],
        ["migrate", *ledger, "--json"],
        ["par", "classic", "--json"],
        ["odds", "--paytable", "classic", "--player", "AsKd", "--flop", "Qh7c2s", "--json"],
    ]
    documents = []
    for args in commands:
        assert main(args) == 0, args
        documents.append(json.loads(capsys.readouterr().out))
    simulated, replayed, verified, migrated, par, odds = documents
    assert replayed["events"] == simulated["events"]
    assert verified["ok"] and verified["checked"] >= replayed["events"]
    assert replayed["rounds"]["settled"] + replayed["rounds"]["voided"] == 3
    assert "0001_ledger.sql" not in migrated["applied"]  # replay migrated the ledger
    assert par["paytable"]["id"] == odds["paytable"] == "casino-holdem/classic"


async def test_verify_reports_its_progress_page_by_page(tmp_path: Path) -> None:
    from croupier.ledger import StreamAppend, open_ledger
    from croupier.settlement.facts import Fact

    async with open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        await ledger.migrate()
        for n in range(25):
            event = Fact("noted", {"n": n}, f"key-{n}")
            await ledger.append([StreamAppend(f"s-{n}", 0, [event])])
        pages: list[int] = []
        report = await ledger.verify(page_size=10, progress=pages.append)
    assert report.ok and pages == [10, 10, 5] and sum(pages) == report.checked
