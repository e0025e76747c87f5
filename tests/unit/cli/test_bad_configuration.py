"""Every way an operator can misconfigure a command ends in one line naming what is wrong
and how to fix it, exit 2, no traceback, no password: one row per case.

Cases that need the real PostgreSQL or RabbitMQ are in
``tests/integration/cli/test_bad_services.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from croupier.cli import SERVICES
from croupier.ledger.signing import LedgerKey
from floor.cli import main

SECRET = "s3cret-pw"


@dataclass(frozen=True)
class Case:
    """``croupier ARGS`` in a scratch directory with ``env``: exit ``code``, ``message``."""

    name: str
    args: list[str]
    message: str
    env: dict[str, str] = field(default_factory=dict)
    code: int = 2
    prepare: Callable[[Path], None] = lambda _: None


def _feed(where: Path) -> None:
    (where / "feed.jsonl").write_text("")


def _not_a_ledger(where: Path) -> None:
    (where / "junk.db").write_bytes(b"this is no SQLite file" * 100)


def _dotenv(where: Path) -> None:
    (where / ".env").write_text("CROUPIER_HTTP_PORT=99999\n")


def _a_file(where: Path) -> None:
    _feed(where)
    (where / "plain").write_text("")


def _keys(where: Path) -> None:
    LedgerKey.generate().write(where / "keys")


def _signed_ledger(where: Path) -> None:
    """A migrated ledger and a signing key (``keys/``), so that serve gets to the broker."""
    LedgerKey.generate().write(where / "keys")
    assert main(["migrate", "--ledger", "sqlite:///serve.db"]) == 0


REPLAY = ["replay", "feed.jsonl", "--ledger", "sqlite:///l.db"]
CASES = [
    Case(
        "port-not-a-number", ["verify"], "CROUPIER_HTTP_PORT='abc'", {"CROUPIER_HTTP_PORT": "abc"}
    ),
    Case(
        "port-too-big", ["migrate"], "CROUPIER_HTTP_PORT='70000'", {"CROUPIER_HTTP_PORT": "70000"}
    ),
    Case("port-from-dotenv", ["verify"], "CROUPIER_HTTP_PORT='99999'", prepare=_dotenv),
    Case("log-level", ["verify"], "CROUPIER_LOG_LEVEL='FOO'", {"CROUPIER_LOG_LEVEL": "foo"}),
    Case("max-batch-env", ["serve"], "CROUPIER_MAX_BATCH='0'", {"CROUPIER_MAX_BATCH": "0"}),
    Case("max-batch-zero", ["serve", "--max-batch", "0"], "--max-batch: 0 is outside 1..10000"),
    Case("max-batch-text", ["serve", "--max-batch", "x"], "--max-batch: 'x' is not a whole number"),
    Case(
        "database-url-scheme",
        ["verify"],
        "is not a ledger URL",
        {"CROUPIER_DATABASE_URL": f"mysql://root:{SECRET}@db/x"},
    ),
    Case(
        "amqp-url-scheme",
        ["verify"],
        "is not a broker URL",
        {"CROUPIER_AMQP_URL": f"http://guest:{SECRET}@broker/"},
    ),
    Case(
        "ledger-option-scheme", ["verify", "--ledger", "sqlite://x.db"], "not a SQLite ledger URL"
    ),
    Case(
        "ledger-no-database",
        ["migrate", "--ledger", "postgresql://h/"],
        "names no host or database",
    ),
    Case(
        "verify-missing-sqlite", ["verify", "--ledger", "sqlite:///gone.db"], "no SQLite ledger at"
    ),
    Case(
        "verify-three-slashes-for-an-absolute-path",
        ["verify", "--ledger", "sqlite:///etc/hostname"],
        "for /etc/hostname write sqlite:////etc/hostname (four slashes)",
    ),
    Case(
        "verify-not-a-ledger",
        ["verify", "--ledger", "sqlite:///junk.db"],
        "is it a Croupier ledger file?",
        prepare=_not_a_ledger,
    ),
    Case(
        "database-down",
        ["verify", "--ledger", f"postgresql://postgres:{SECRET}@127.0.0.1:1/croupier"],
        "PostgreSQL at 127.0.0.1:1 does not answer",
    ),
    Case(
        "database-host-unknown",
        ["migrate", "--ledger", "postgresql://postgres@no-such-host.invalid/croupier"],
        "PostgreSQL host in postgresql://postgres@no-such-host.invalid/croupier is unknown",
    ),
    Case(
        "broker-down",
        ["serve"],
        "RabbitMQ at 127.0.0.1:1 does not answer",
        {
            "CROUPIER_AMQP_URL": f"amqp://guest:{SECRET}@127.0.0.1:1/",
            "CROUPIER_DATABASE_URL": "sqlite:///serve.db",
            "CROUPIER_HTTP_PORT": "0",
            "CROUPIER_LEDGER_SIGNING_KEY": "keys/ledger-signing.key",
        },
        prepare=_signed_ledger,
    ),
    Case(
        "serve-no-signing-key",
        ["serve"],
        "CROUPIER_LEDGER_SIGNING_KEY is not set; make a key pair with `croupier keygen",
        {"CROUPIER_DATABASE_URL": "sqlite:///serve.db"},
    ),
    Case(
        "serve-unreadable-signing-key",
        ["serve"],
        "cannot read the signing key nokey",
        {"CROUPIER_DATABASE_URL": "sqlite:///serve.db", "CROUPIER_LEDGER_SIGNING_KEY": "nokey"},
    ),
    Case(
        "serve-schema-behind",
        ["serve"],
        "the ledger schema is at version 0, this build needs 7: run `croupier migrate` as the",
        {
            "CROUPIER_DATABASE_URL": "sqlite:///empty.db",
            "CROUPIER_LEDGER_SIGNING_KEY": "keys/ledger-signing.key",
        },
        prepare=lambda where: LedgerKey.generate().write(where / "keys") and None,
    ),
    Case(
        "replay-no-feed", [*REPLAY, "--out", "o", "--rejections", "r"], "no such file: feed.jsonl"
    ),
    Case(
        "replay-out-is-a-directory",
        [*REPLAY, "--out", ".", "--rejections", "r"],
        "--out: . is a directory",
        prepare=_feed,
    ),
    Case(
        "replay-out-unwritable",
        [*REPLAY, "--out", "plain/o.jsonl", "--rejections", "r"],
        "--out: cannot write plain/o.jsonl: Not a directory",
        prepare=_a_file,
    ),
    Case(
        "replay-rejections-missing-folder",
        [*REPLAY, "--out", "o", "--rejections", "no/such/r.jsonl"],
        "--rejections: cannot write no/such/r.jsonl: No such file or directory",
        prepare=_feed,
    ),
    Case(
        "simulate-out-is-a-directory",
        ["simulate", "--rounds", "1", "--out", "."],
        "--out: . is a directory",
    ),
    Case(
        "simulate-unknown-paytable",
        ["simulate", "--rounds", "1", "--tables", "baccarat", "--out", "f"],
        "unknown pay table 'baccarat'",
    ),
    Case("par-unknown-paytable", ["par", "baccarat"], "unknown pay table 'baccarat'"),
    Case("par-nothing-named", ["par"], "no pay table named; name one"),
    Case(
        "odds-bad-cards",
        ["odds", "--paytable", "classic", "--player", "AsAs", "--flop", "Qh7c2s"],
        "a card may appear only once",
    ),
    Case("unknown-command", ["deal"], "invalid choice: 'deal'"),
    Case(
        "contracts-out-in-a-missing-folder",
        ["contracts", "--out", "missing/dir"],
        "missing does not exist: missing/dir cannot be made in it",
    ),
    Case(
        "contracts-out-a-file",
        ["contracts", "--out", "plain"],
        "--out: plain is not a folder",
        prepare=_a_file,
    ),
    Case(
        "keygen-out-under-a-device",
        ["keygen", "--out", "/dev/null/x"],
        "--out: /dev/null is not a folder: /dev/null/x cannot be made in it",
    ),
    Case(
        "keygen-out-exists", ["keygen", "--out", "keys"], "ledger-signing.key exists", prepare=_keys
    ),
    Case("demo-negative-rounds", ["demo", "--embedded", "--rounds", "-1"], "rounds must be >= 0"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_configuration_is_one_line_and_exit_2(
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    case.prepare(tmp_path)

    code = main(case.args)

    out, err = capsys.readouterr()
    assert code == case.code, err
    *logs, line = err.splitlines()
    if case.args[0] in SERVICES:
        assert all(json.loads(log)["level"] for log in logs), err  # a service logs JSON lines
    else:  # its own progress lines may come first, no log line of a library
        assert not [log for log in logs if log.startswith("{")], err
    assert case.message in line, err
    assert line.startswith(f"croupier {case.args[0]}:") or line.startswith("croupier:"), err
    assert "Traceback" not in out + err
    assert SECRET not in out + err
    assert "Errno" not in err


def test_debug_shows_the_traceback_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--ledger", "sqlite:///gone.db", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.splitlines()[-1].startswith("croupier verify: no SQLite ledger at")


def test_verify_of_a_missing_sqlite_file_does_not_create_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--ledger", "sqlite:///var/gone.db"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_help_works_with_a_bad_environment_and_names_every_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CROUPIER_HTTP_PORT", "abc")
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for variable in ("DATABASE_URL", "AMQP_URL", "HTTP_PORT", "LOG_LEVEL", "MAX_BATCH"):
        assert f"CROUPIER_{variable}" in out
    assert "(default 9464)" in out
    assert "guest:***@" in out and "guest:guest" not in out
    assert "exit codes: 0 done; 1 a finding" in out


@pytest.mark.parametrize(
    "args",
    [["contracts", "--out", "missing/dir"], ["keygen", "--out", "missing/keys"]],
    ids=["contracts", "keygen"],
)
def test_an_unusable_output_folder_writes_nothing(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_is_made_in_one_that_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["keygen", "--out", "keys"]) == 0
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == [
        "ledger-signing.key",
        "ledger-signing.pub",
    ]


def test_a_file_the_command_cannot_write_is_exit_2_without_errno(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "feed").write_text("a file where a folder goes")
    assert main(["contracts", "--out", "contracts"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("croupier contracts: cannot use ") and "Errno" not in err, err
    assert len(err.splitlines()) == 1
