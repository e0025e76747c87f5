"""Signed heads, signed publish marks and the key files, on the embedded SQLite ledger."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest
from ledger_suite import append, event, message

from croupier.cli import main
from croupier.ledger import HeadNotSigned, OutboxMessage, StreamAppend, open_ledger
from croupier.ledger.signing import (
    PRIVATE_KEY_FILE,
    PUBLIC_KEY_FILE,
    LedgerKey,
    LedgerPublicKey,
    SigningKeyError,
)


def test_keygen_writes_a_pair_that_verifies_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    private = tmp_path / "keys" / PRIVATE_KEY_FILE
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    key = LedgerKey.from_file(private)
    public = LedgerPublicKey.from_file(tmp_path / "keys" / PUBLIC_KEY_FILE)
    assert public.key_id == key.public.key_id
    signature = key.sign_head(7, "ab" * 32)
    assert public.verify_head(7, "ab" * 32, signature)
    assert not public.verify_head(8, "ab" * 32, signature)
    assert not public.verify_mark(["7"], signature)  # a head signature is no mark signature
    assert not LedgerKey.generate().public.verify_head(7, "ab" * 32, signature)
    capsys.readouterr()
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 2
    assert "exists" in capsys.readouterr().err


def test_a_missing_or_wrong_key_file_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(SigningKeyError, match="croupier keygen"):
        LedgerKey.from_file(tmp_path / "none.key")
    (tmp_path / "bad.key").write_text("not a key")
    with pytest.raises(SigningKeyError, match="not a usable PEM"):
        LedgerKey.from_file(tmp_path / "bad.key")


async def test_each_batch_head_is_signed_and_verifies_with_the_public_key(tmp_path: Path) -> None:
    key = LedgerKey.generate()
    async with open_ledger(f"sqlite:///{tmp_path / 'l.db'}", key) as ledger:
        await ledger.migrate()
        await ledger.append([append("a", 0, 3)])
        await ledger.append([append("b", 0, 2)])
        await ledger.append([append("a", None, 0)], [message("m1")])  # no new rows: no head
        report = await ledger.verify(public_key=key.public)
        assert report.ok, report.summary()
    with sqlite3.connect(tmp_path / "l.db") as conn:
        heads = conn.execute("SELECT position FROM ledger_heads ORDER BY id").fetchall()
    assert heads == [(3,), (5,)]


async def test_rows_above_the_last_signed_head_are_unsigned(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    key = LedgerKey.generate()
    async with open_ledger(url, key) as ledger:
        await ledger.migrate()
        await ledger.append([append("a", 0, 3)])
    async with open_ledger(url) as unsigned:  # someone without the key appends
        await unsigned.append([append("b", 0, 2)])
    async with open_ledger(url, key) as ledger:
        report = await ledger.verify(public_key=key.public)
        assert report.unsigned == [4, 5]
        with pytest.raises(HeadNotSigned, match="head at position 5"):
            await ledger.append([append("c", 0, 1)])
    async with open_ledger(url, LedgerKey.generate()) as other:
        with pytest.raises(HeadNotSigned):
            await other.append([append("c", 0, 1)])


async def test_a_ledger_without_any_signed_head_is_adopted_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    async with open_ledger(url) as unsigned:
        await unsigned.migrate()
        await unsigned.append([append("a", 0, 3)])
    key = LedgerKey.generate()
    async with open_ledger(url, key) as ledger:
        await ledger.append([append("b", 0, 1)])
        assert (await ledger.verify(public_key=key.public)).ok


async def test_only_markers_this_key_signed_count_as_published(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    key = LedgerKey.generate()
    async with open_ledger(url, key) as ledger:
        await ledger.migrate()
        await ledger.append([append("a", 0, 1)], [message("m1"), message("m2")])
        await ledger.mark_published(["m1"])
    with sqlite3.connect(tmp_path / "l.db") as conn:
        conn.execute("INSERT INTO outbox_published (message_id) VALUES ('m2')")
    async with open_ledger(url, key) as ledger:  # a fresh process: nothing remembered
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m2"]
        report = await ledger.verify(public_key=key.public)
        assert report.rows("outbox_published", "forged") == ["message_id m2 mark none"]
    async with open_ledger(url) as unsigned:  # without a key every marker counts
        assert await unsigned.pending_outbox() == []


async def test_vouched_rows_link_up_to_a_signed_head(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    key = LedgerKey.generate()
    async with open_ledger(url, key) as ledger:
        await ledger.migrate()
        await ledger.append([append("a", 0, 4)])
        settled = event("k-settled", "round.settled")
        report = OutboxMessage("m1", "croupier.settlements", "EUR.p1", {}, settled.key)
        await ledger.append([StreamAppend("b", 0, [settled])], [report])
        assert set(await ledger.vouched([1, 3, 5])) == {1, 3, 5}
    async with open_ledger(url) as unsigned:
        await unsigned.append([append("c", 0, 2)])
    async with open_ledger(url, key) as ledger:
        assert set(await ledger.vouched([2, 5, 6, 7])) == {2, 5}
        pending = await ledger.pending_outbox()
        assert [(m.position, m.event_hash != "") for m in pending] == [(5, True)]


async def test_only_set_aside_rows_this_key_signed_are_listed_and_verify(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    key = LedgerKey.generate()
    async with open_ledger(url, key) as ledger:
        await ledger.migrate()
        await ledger.append([append("a", 0, 1)], [message("m1"), message("m2")])
        await ledger.set_aside({"m1": "unroutable: no queue"})
        await ledger.set_aside({"m1": "unroutable: no queue"})  # idempotent
        assert [(m.message_id, why) for m, why in await ledger.set_aside_messages()] == [
            ("m1", "unroutable: no queue")
        ]
        report = await ledger.verify(public_key=key.public)
        assert report.ok, report.summary()
        assert report.notes == (
            "outbox_set_aside: id 1 message_id m1: unroutable: no queue (not published)",
        )
    with sqlite3.connect(tmp_path / "l.db") as conn:
        conn.execute("INSERT INTO outbox_set_aside (message_id, reason) VALUES ('m2', 'nacked')")
    async with open_ledger(url, key) as ledger:  # a fresh process: set aside, not suppressed
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m1", "m2"]
        assert [m.message_id for m, _ in await ledger.set_aside_messages()] == ["m1"]
        report = await ledger.verify(public_key=key.public)
        assert report.rows("outbox_set_aside", "forged") == ["id 2 message_id m2"]
    async with open_ledger(url) as unsigned:  # without a key every row counts
        assert [m.message_id for m, _ in await unsigned.set_aside_messages()] == ["m1", "m2"]


async def test_verify_lists_set_aside_rows_up_to_a_bound_then_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("croupier.ledger.audit.NOTES_KEPT", 1)
    key = LedgerKey.generate()
    async with open_ledger(f"sqlite:///{tmp_path / 'l.db'}", key) as ledger:
        await ledger.migrate()
        await ledger.append([append("a", 0, 1)], [message(f"m{n}") for n in range(3)])
        await ledger.set_aside({f"m{n}": "nacked" for n in range(3)})
        report = await ledger.verify(public_key=key.public)
    assert report.ok
    assert report.notes == (
        "outbox_set_aside: id 1 message_id m0: nacked (not published)",
        "outbox_set_aside: and 2 more rows set aside",
    )
