"""Key rotation on the SQLite ledger as an operator does it, through the ``croupier`` program:
replay, ``rotate-key``, replay under the new key and the keyring, again, and ``verify``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from croupier_feeds import RoundFeed, line

from croupier.cli import main
from croupier.ledger.signing import LedgerKey, LedgerPublicKey


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


Croupier = Callable[..., Done]


@pytest.fixture
def croupier(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Croupier:
    """``croupier ARGS`` with ``env`` (the signing key and keyring variables) set for it."""

    def run(*args: str, env: dict[str, str] | None = None) -> Done:
        capsys.readouterr()
        with monkeypatch.context() as patch:
            for name in ("CROUPIER_LEDGER_SIGNING_KEY", "CROUPIER_LEDGER_KEYRING"):
                patch.setenv(name, (env or {}).get(name, ""))
            code = main(list(args))
        out = capsys.readouterr()
        return Done(code, out.out, out.err)

    return run


def feed(path: Path, table: str, rounds: int) -> Path:
    lines = []
    for n in range(rounds):
        f = RoundFeed(table_id=table, round_id=f"r{n}")
        events = (
            f.opened(),
            f.bet("a1"),
            f.hole("As Ks"),
            f.cards("dealer", "2c 7d"),
            f.cards("board", "Qs Js 4h"),
            f.decide("a1", "flop", "call", "c1", 200),
            f.cards("board", "8c 6h"),
            f.completed(),
        )
        lines += [line(e) for e in events]
    path.write_text("\n".join(lines) + "\n")
    return path


def replay(croupier: Croupier, tmp: Path, name: str, ledger: str, env: dict[str, str]) -> Done:
    source = feed(tmp / f"{name}.jsonl", name, 3)
    out, rejected = tmp / f"{name}-results.jsonl", tmp / f"{name}-rejected.jsonl"
    return croupier(
        "replay", str(source), "--out", str(out), "--rejections", str(rejected),
        "--ledger", ledger, env=env,
    )  # fmt: skip


def test_replay_goes_on_across_two_rotations_and_verify_checks_each_key(
    tmp_path: Path, croupier: Croupier
) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    pairs = [LedgerKey.generate().write(tmp_path / f"key{n}") for n in (1, 2, 3)]
    ids = [LedgerPublicKey.from_file(public).key_id for _, public in pairs]
    keyring = tmp_path / "keyring.json"
    signing = [{"CROUPIER_LEDGER_SIGNING_KEY": str(private)} for private, _ in pairs]
    with_keyring = [{**env, "CROUPIER_LEDGER_KEYRING": str(keyring)} for env in signing]

    assert replay(croupier, tmp_path, "t1", ledger, signing[0]).returncode == 0
    done = croupier(
        "rotate-key", "--to", str(pairs[1][1]), "--keyring", str(keyring), "--ledger", ledger,
        env=signing[0],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = int(re.findall(r"handed over at position (\d+)", done.stdout)[0])

    # The new key without the keyring: exit 2 naming the old key, nothing written.
    done = replay(croupier, tmp_path, "t2", ledger, signing[1])
    assert done.returncode == 2, done.stderr
    assert f"signed with another key ({ids[0]}), not in the keyring" in done.stderr
    assert "Traceback" not in done.stderr
    # The old key after its handover: exit 2 as well.
    done = replay(croupier, tmp_path, "t2", ledger, signing[0])
    assert done.returncode == 2 and f"handed the ledger over to key {ids[1]}" in done.stderr

    assert replay(croupier, tmp_path, "t2", ledger, with_keyring[1]).returncode == 0
    done = croupier("rotate-key", "--to", str(pairs[2][1]), "--ledger", ledger, env=with_keyring[1])
    assert done.returncode == 0, done.stderr
    second = int(re.findall(r"handed over at position (\d+)", done.stdout)[0])
    assert replay(croupier, tmp_path, "t3", ledger, with_keyring[2]).returncode == 0

    kept = json.loads(keyring.read_text())["keys"]
    assert [(k["key_id"], k["first"], k.get("last")) for k in kept] == [
        (ids[0], 1, first),
        (ids[1], first + 1, second),
        (ids[2], second + 1, None),
    ]
    publics = [str(public) for _, public in pairs]
    for audit in (
        ["--keyring", str(keyring)],
        ["--public-key", publics[0], "--public-key", publics[1], "--public-key", publics[2]],
        ["--public-key", publics[0]],  # trust passes along the handovers
    ):
        done = croupier("verify", "--ledger", ledger, *audit)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "ledger chain ok" in done.stdout

    # A key left out, a revoked key: each refused and named.
    done = croupier(
        "verify", "--ledger", ledger, "--public-key", publics[1], "--public-key", publics[2]
    )
    assert done.returncode == 1
    assert f"signed with another key ({ids[0]}), not in the keyring" in done.stdout
    revoked = tmp_path / "revoked.json"
    revoked.write_text(keyring.read_text())
    done = croupier("revoke-key", ids[1], "--from", str(first + 1), "--keyring", str(revoked))
    assert done.returncode == 0, done.stderr
    done = croupier("verify", "--ledger", ledger, "--keyring", str(revoked))
    assert done.returncode == 1
    assert f"key {ids[1]} is revoked from position {first + 1}" in done.stdout
