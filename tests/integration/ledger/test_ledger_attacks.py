"""Attacks on the ledger by someone holding the service's database credentials (the app
role) or the owner's, but not the service's signing key.

Each test settles real rounds through the settler as the service does (least-privileged
role, signing key), attacks, then relays the outbox and runs ``croupier verify
--public-key``: nothing forged is published, and verify exits 1 naming the rows. An
untouched ledger publishes every result and verifies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from integration.service.service_harness import Wallet, prepare_broker, service_role

from contract.canonical import canonical_json
from croupier.bus import Outgoing
from croupier.bus.memory import MemoryBus
from croupier.cli import main
from croupier.ledger import (
    HeadNotSigned,
    Ledger,
    OutboxMessage,
    SchemaBehind,
    VerifyReport,
    open_ledger,
)
from croupier.ledger.chain import GENESIS_HASH, format_timestamp, row_hash
from croupier.ledger.signing import PUBLIC_KEY_FILE, LedgerKey
from croupier.metrics import Metrics
from croupier.settlement.deadletters import dead_letter
from croupier.settlement.relay import OutboxRelay
from croupier.settlement.results import outbox_rule, result_bodies
from croupier.settlement.round import SETTLED
from croupier.settlement.settler import Inbound, Settler
from studio import StudioConfig, simulate
from studio.config import parse_table_specs

pytestmark = pytest.mark.integration

_LEDGER_TABLES = (
    "events",
    "outbox",
    "outbox_published",
    "outbox_set_aside",
    "outbox_marks",
    "ledger_heads",
)


@dataclass
class Scene:
    """A settled ledger: the owner's URL, the service's, its key, and the service's ledger."""

    owner_url: str
    service_url: str
    key: LedgerKey
    public_key: Path
    ledger: Ledger
    expected: dict[str, dict[str, Any]]  # every result the settled rounds call for, by id

    async def relay(self) -> tuple[dict[str, Outgoing], Metrics]:
        """Relay the whole outbox as the service does; what a wallet received, by id."""
        bus = MemoryBus()
        got: dict[str, Outgoing] = {}
        bus.subscribe("#", lambda message: got.__setitem__(message.message_id, message))
        return got, await self.relay_onto(bus)

    async def relay_onto(self, bus: MemoryBus) -> Metrics:
        """Relay the whole outbox onto ``bus`` as the service does; the relay's metrics."""
        metrics = Metrics()
        relay = OutboxRelay(self.ledger, bus, metrics)
        assert await relay.hold()  # the one publisher of this outbox
        await relay.drain()
        return metrics

    async def settled(self) -> list[asyncpg.Record]:
        return await self.owner(
            "SELECT position, hash, data::text FROM events WHERE type = $1 ORDER BY position",
            SETTLED,
        )

    async def owner(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.owner_url)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    async def as_app(self, *statements: str) -> None:
        """Run statements as the service's login role (INSERT and SELECT only)."""
        conn = await asyncpg.connect(self.service_url)
        try:
            async with conn.transaction():
                for statement in statements:
                    await conn.execute(statement)
        finally:
            await conn.close()

    async def as_owner(self, *statements: str) -> None:
        """Run statements as the owner with every append-only trigger out of the way."""
        conn = await asyncpg.connect(self.owner_url)
        try:
            async with conn.transaction():
                for table in _LEDGER_TABLES:
                    await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
                for statement in statements:
                    await conn.execute(statement)
                for table in _LEDGER_TABLES:
                    await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        finally:
            await conn.close()

    async def attack(self, role: str, *statements: str) -> None:
        await (self.as_app if role == "app" else self.as_owner)(*statements)

    async def report(self, anchor: tuple[int, str] | None = None) -> VerifyReport:
        from croupier.ledger.signing import LedgerPublicKey

        async with open_ledger(self.owner_url) as auditor:
            return await auditor.verify(
                anchor=anchor,
                public_key=LedgerPublicKey.from_file(self.public_key),
                outbox_rule=outbox_rule,
            )

    async def cli_verify(self, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
        """``croupier verify --public-key`` as an auditor runs it: exit code and output."""
        capsys.readouterr()
        argv = ["verify", "--ledger", self.owner_url, "--public-key", str(self.public_key)]
        code = await asyncio.to_thread(main, [*argv, *extra])
        return code, capsys.readouterr().out


def _feed(rounds: int, seed: int) -> list[bytes]:
    tables = parse_table_specs(["classic:shared=4", "standard:boxes=3"], prefix=f"sec{seed}")
    config = StudioConfig(tables=tables, rounds=rounds, seed=seed)
    return [message.body for message in simulate(config)]


async def settle(ledger: Ledger, lines: list[bytes], batch: int = 40) -> None:
    settler = Settler(ledger)
    for start in range(0, len(lines), batch):
        chunk = lines[start : start + batch]
        await settler.handle([Inbound(line, n) for n, line in enumerate(chunk)])


@pytest.fixture
async def scene(postgres_database: str, tmp_path: Path) -> AsyncIterator[Scene]:
    key = LedgerKey.generate()
    key.write(tmp_path / "keys")
    async with (
        service_role(postgres_database) as service_url,
        open_ledger(service_url, key) as ledger,
    ):
        await settle(ledger, _feed(12, seed=7))
        scene = Scene(
            postgres_database, service_url, key, tmp_path / "keys" / PUBLIC_KEY_FILE, ledger, {}
        )
        for row in await scene.settled():
            for body in result_bodies(json.loads(row["data"])):
                scene.expected[body["message_id"]] = {**body, "ledger_position": row["position"]}
        assert scene.expected
        yield scene


def _refused(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("croupier_results_refused_total") or 0.0


def _bodies(got: dict[str, Outgoing]) -> dict[str, dict[str, Any]]:
    return {message_id: dict(m.body) for message_id, m in got.items()}


async def test_an_untouched_ledger_publishes_every_result_and_verifies(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    got, _metrics = await scene.relay()
    assert _bodies(got) == scene.expected
    report = await scene.report()
    assert report.ok, report.summary()
    assert report.checked == (await scene.owner("SELECT count(*) FROM events"))[0][0]
    code, out = await scene.cli_verify(capsys)
    assert code == 0, out
    assert "ledger chain ok" in out


async def test_the_service_role_may_not_change_or_remove_anything(scene: Scene) -> None:
    for statement in (
        "UPDATE outbox SET body = '{}'",
        "DELETE FROM events",
        "DELETE FROM outbox_published",
        "TRUNCATE ledger_heads",
        "UPDATE schema_migrations SET version = 99",
        "INSERT INTO schema_migrations (version, name) VALUES (99, 'x')",
        "ALTER TABLE outbox_marks DISABLE TRIGGER USER",
        "CREATE TABLE mine (x int)",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await scene.as_app(statement)


async def test_schema_migrations_is_append_only_and_start_up_only_checks_it(
    scene: Scene,
) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await scene.owner("TRUNCATE schema_migrations")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await scene.owner("DELETE FROM schema_migrations")
    await scene.ledger.check_schema()  # current: the service starts
    await scene.as_owner(
        "ALTER TABLE schema_migrations DISABLE TRIGGER USER",
        "DELETE FROM schema_migrations WHERE version = "
        "(SELECT max(version) FROM schema_migrations)",
        "ALTER TABLE schema_migrations ENABLE TRIGGER USER",
    )
    with pytest.raises(SchemaBehind, match="run `croupier migrate` as the database owner"):
        await scene.ledger.check_schema()


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_forged_outbox_rows_are_refused_and_reported(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    position, digest, data = (await scene.settled())[0]
    real = result_bodies(json.loads(data))[0]
    mallory = {
        **real,
        "message_id": "forged-1",
        "player_id": "mallory",
        "returned_total": 99_999_900,
    }
    await scene.attack(
        role,
        # next to a real settlement, naming its position and hash
        "INSERT INTO outbox (message_id, position, exchange, routing_key, body, event_hash) "
        f"VALUES ('forged-1', {position}, 'croupier.settlements', 'EUR.mallory', "
        f"'{canonical_json(mallory)}', '{digest}')",
        # naming no event at all
        "INSERT INTO outbox (message_id, position, exchange, routing_key, body, event_hash) "
        f"VALUES ('forged-2', 999999, 'croupier.settlements', 'EUR.mallory', "
        f"'{canonical_json(mallory)}', '{GENESIS_HASH}')",
    )
    got, metrics = await scene.relay()
    assert _bodies(got) == scene.expected  # every real result, nothing else
    assert _refused(metrics) == 2
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert "outbox forged: seq" in out and "message_id forged-1" in out
    assert "message_id forged-2" in out


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_a_forged_publish_marker_does_not_suppress_a_result(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = next(iter(scene.expected))
    await scene.attack(
        role,
        f"INSERT INTO outbox_published (message_id) VALUES ('{victim}')",
        "INSERT INTO outbox_marks (message_ids, key_id, signature) VALUES "
        f"('{json.dumps([victim])}', 'mallory', '{'ab' * 64}')",
        "INSERT INTO outbox_published (message_id, mark) SELECT "
        f"'{victim}', max(mark) FROM outbox_marks",
    )
    got, _ = await scene.relay()
    assert _bodies(got) == scene.expected  # the victim's result went out all the same
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"outbox_published forged: message_id {victim} mark none" in out
    assert "outbox_marks forged: mark" in out


async def test_an_edited_pending_result_is_refused_and_reported(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    victim, body = next(iter(scene.expected.items()))
    edited = {k: v for k, v in body.items() if k != "ledger_position"}
    edited["returned_total"] += 100_000
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await scene.as_app(f"UPDATE outbox SET body = '{canonical_json(edited)}'")
    await scene.as_owner(
        f"UPDATE outbox SET body = '{canonical_json(edited)}' WHERE message_id = '{victim}'"
    )
    got, metrics = await scene.relay()
    assert victim not in got
    assert _bodies(got) == {k: v for k, v in scene.expected.items() if k != victim}
    assert _refused(metrics) == 1
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert "outbox changed: seq" in out and f"message_id {victim}" in out


async def test_a_suppressed_outbox_row_is_reported_missing(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = next(iter(scene.expected))
    await scene.as_owner(f"DELETE FROM outbox WHERE message_id = '{victim}'")
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"outbox missing: message_id {victim}" in out


async def _forge_settlement_at_head(scene: Scene, role: str, head_key: LedgerKey) -> int:
    """Append a correctly hashed copy of a real settlement paying mallory, its outbox row
    (exactly what that fact calls for) and a head row signed with ``head_key``."""
    _position, _, data = (await scene.settled())[-1]
    head = await scene.owner("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1")
    at, prev = head[0]["position"] + 1, head[0]["hash"]
    fact = json.loads(data)
    fact["event"] = {**fact["event"], "round_id": "forged-round"}
    for line in fact["results"]:
        line["player_id"], line["returned"] = "mallory", 99_999_900
    text = canonical_json(fact)
    stamp = format_timestamp(datetime.now(UTC))
    stream, key = "round:forged:1", "forged-settlement"
    digest = row_hash(prev, at, stream, 1, SETTLED, text, key, stamp)
    message = outbox_rule(SETTLED, text)[0]
    await scene.attack(
        role,
        "INSERT INTO events (position, stream, version, type, data, key, recorded_at, "
        f"prev_hash, hash) VALUES ({at}, '{stream}', 1, '{SETTLED}', '{text}', '{key}', "
        f"'{stamp}', '{prev}', '{digest}')",
        "INSERT INTO outbox (message_id, position, exchange, routing_key, body, event_hash) "
        f"VALUES ('{message.message_id}', {at}, '{message.exchange}', "
        f"'{message.routing_key}', '{message.body}', '{digest}')",
        "INSERT INTO ledger_heads (position, hash, key_id, signature) VALUES "
        f"({at}, '{digest}', '{head_key.public.key_id}', '{head_key.sign_head(at, digest)}')",
    )
    return at


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_a_forged_settlement_at_the_head_is_neither_published_nor_accepted(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    at = await _forge_settlement_at_head(scene, role, LedgerKey.generate())
    got, metrics = await scene.relay()
    assert _bodies(got) == scene.expected
    assert _refused(metrics) >= 1
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"events unsigned: position {at}" in out
    assert "ledger_heads forged: id" in out and "signed with another key" in out
    report = await scene.report()
    assert report.unsigned == [at]
    # The service does not sign over it: it stops appending and says why.
    with pytest.raises(HeadNotSigned, match=f"head at position {at} is not signed"):
        await settle(scene.ledger, _feed(2, seed=99))


async def test_a_rewritten_and_rehashed_chain_is_neither_published_nor_accepted(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = await scene.owner(
        "SELECT position, stream, version, type, data::text, key, recorded_at, prev_hash, hash "
        "FROM events ORDER BY position"
    )
    settled = [r for r in rows if r["type"] == SETTLED]
    target = settled[len(settled) // 2]["position"]
    forger = LedgerKey.generate()
    signed_below = (
        await scene.owner("SELECT max(position) FROM ledger_heads WHERE position < $1", target)
    )[0][0]
    statements = []
    prev = rows[target - 2]["hash"]
    for row in rows[target - 1 :]:
        data = row["data"]
        if row["position"] == target:
            fact = json.loads(data)
            for line in fact["results"]:
                line["returned"] += 1000
            data = canonical_json(fact)
        stamp = format_timestamp(row["recorded_at"])
        digest = row_hash(
            prev,
            row["position"],
            row["stream"],
            row["version"],
            row["type"],
            data,
            row["key"],
            stamp,
        )
        statements.append(
            f"UPDATE events SET data = '{data}', prev_hash = '{prev}', hash = '{digest}' "
            f"WHERE position = {row['position']}"
        )
        statements.append(
            f"UPDATE outbox SET event_hash = '{digest}' WHERE position = {row['position']}"
        )
        for message in outbox_rule(row["type"], data):
            statements.append(
                f"UPDATE outbox SET body = '{message.body}' "
                f"WHERE message_id = '{message.message_id}'"
            )
        prev = digest
    last = rows[-1]["position"]
    statements.append(
        "INSERT INTO ledger_heads (position, hash, key_id, signature) VALUES "
        f"({last}, '{prev}', '{forger.public.key_id}', '{forger.sign_head(last, prev)}')"
    )
    await scene.as_owner(*statements)
    got, metrics = await scene.relay()
    # Results from the rewritten row's batch on no longer link up to a signed head.
    rewritten = {m for m, b in scene.expected.items() if b["ledger_position"] > signed_below}
    assert rewritten
    assert _bodies(got) == {k: v for k, v in scene.expected.items() if k not in rewritten}
    assert _refused(metrics) == len(rewritten)
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert "differs from the signed head" in out
    report = await scene.report()
    assert report.changed and min(report.changed) >= target
    assert report.rows("ledger_heads", "forged")


async def test_a_second_croupier_with_another_key_cannot_append_unnoticed(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    mallory = LedgerKey.generate()
    async with open_ledger(scene.service_url, mallory) as theirs:
        with pytest.raises(HeadNotSigned):  # Croupier's own code refuses to sign over ours
            await settle(theirs, _feed(2, seed=41))
        # Forced past that check, it appends rounds signed with its own key.
        head = await scene.owner("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1")
        theirs.trust.head = (head[0]["position"], head[0]["hash"])
        await settle(theirs, _feed(2, seed=41))
    first = head[0]["position"] + 1
    last = (await scene.owner("SELECT max(position) FROM events"))[0][0]
    got, _ = await scene.relay()
    assert _bodies(got) == scene.expected  # none of their results is published by ours
    report = await scene.report()
    assert report.unsigned == list(range(first, last + 1))
    assert report.rows("ledger_heads", "forged")
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"events unsigned: position {first}" in out
    with pytest.raises(HeadNotSigned):
        await settle(scene.ledger, _feed(2, seed=43))


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_a_tail_cut_is_reported(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    last = (await scene.owner("SELECT max(position) FROM events"))[0][0]
    cut = f"DELETE FROM events WHERE position > {last - 5}"
    if role == "app":
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await scene.as_app(cut)
        assert (await scene.report()).ok
        return
    await scene.as_owner(cut, f"DELETE FROM outbox WHERE position > {last - 5}")
    report = await scene.report()
    assert report.removed == list(range(last - 4, last + 1))
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"events removed: position {last}" in out
    got, _ = await scene.relay()
    assert all(b["ledger_position"] <= last - 5 for b in _bodies(got).values())


async def test_truncation_is_reported(scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    last = (await scene.owner("SELECT max(position) FROM events"))[0][0]
    await scene.as_owner("TRUNCATE events, outbox_published, outbox CASCADE")
    report = await scene.report()
    assert report.removed == list(range(1, last + 1))
    code, out = await scene.cli_verify(capsys)
    assert code == 1 and "events removed: position 1" in out


async def test_cutting_the_signed_heads_too_takes_the_kept_anchor(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = await scene.report()  # what an auditor keeps outside the database
    assert kept.ok
    anchor = f"{kept.head_position}:{kept.head_hash}"
    cut = kept.head_position - 10
    await scene.as_owner(
        f"DELETE FROM events WHERE position > {cut}",
        f"DELETE FROM outbox_published WHERE message_id IN "
        f"(SELECT message_id FROM outbox WHERE position > {cut})",
        f"DELETE FROM outbox WHERE position > {cut}",
        f"DELETE FROM ledger_heads WHERE position > {cut}",
    )
    report = await scene.report(anchor=(kept.head_position, kept.head_hash))
    assert report.removed[-1] == kept.head_position
    code, out = await scene.cli_verify(capsys, "--anchor", anchor)
    assert code == 1 and f"events removed: position {kept.head_position}" in out


def _forged_result(real: dict[str, Any], message_id: str) -> dict[str, Any]:
    return {**real, "message_id": message_id, "player_id": "mallory", "returned_total": 99_999_900}


async def _forge_or_edit_result(scene: Scene, role: str) -> str:
    """As the app role, a forged outbox row next to a real settlement; as the owner, a real
    pending result edited. The message id of the row now lying."""
    position, digest, data = (await scene.settled())[0]
    real = result_bodies(json.loads(data))[0]
    if role == "app":
        await scene.as_app(
            "INSERT INTO outbox (message_id, position, exchange, routing_key, body, event_hash) "
            f"VALUES ('forged-1', {position}, 'croupier.settlements', 'EUR.mallory', "
            f"'{canonical_json(_forged_result(real, 'forged-1'))}', '{digest}')"
        )
        return "forged-1"
    edited = {**real, "returned_total": real["returned_total"] + 100_000}
    await scene.as_owner(
        f"UPDATE outbox SET body = '{canonical_json(edited)}' "
        f"WHERE message_id = '{real['message_id']}'"
    )
    return str(real["message_id"])


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_redrive_results_refuses_what_the_relay_refused(
    scene: Scene,
    role: str,
    amqp_vhost: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The relay refuses a lying outbox row and sets it aside (signed: the service wrote the
    set-aside row); ``croupier redrive --results`` applies the relay's rule again and
    refuses it, while it publishes a real result the broker had refused."""
    lying = await _forge_or_edit_result(scene, role)
    unrouted = next(m for m in scene.expected if m != lying)
    await scene.ledger.set_aside({unrouted: "unroutable: no queue bound for EUR.p1"})
    got, metrics = await scene.relay()
    assert _refused(metrics) == 1 and lying not in got and unrouted not in got
    await prepare_broker(amqp_vhost)
    monkeypatch.setenv("CROUPIER_LEDGER_SIGNING_KEY", str(scene.public_key.with_suffix(".key")))
    capsys.readouterr()
    redrive = ["redrive", "--results", "--ledger", scene.service_url, "--amqp", amqp_vhost]
    assert await asyncio.to_thread(main, [*redrive, "--json"]) == 1
    listed = {m["message_id"]: m for m in json.loads(capsys.readouterr().out)["messages"]}
    assert listed[lying]["action"] == "refused"
    assert "refused:" in listed[lying]["reason"]
    assert listed[unrouted]["action"] == "redriven"
    wallet = Wallet(amqp_vhost)
    await wallet.wait_for([unrouted], timeout=30)
    await asyncio.sleep(0.5)
    await wallet.drain()
    assert set(wallet.unique) == {unrouted}  # nothing lying reached the broker
    assert wallet.unique[unrouted].body == scene.expected[unrouted]
    # Without the service's key, a ledger with signed heads is not redriven at all.
    monkeypatch.delenv("CROUPIER_LEDGER_SIGNING_KEY")
    assert await asyncio.to_thread(main, redrive) == 2
    assert "set CROUPIER_LEDGER_SIGNING_KEY" in capsys.readouterr().err


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_a_forged_set_aside_row_suppresses_nothing_and_is_reported(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = next(iter(scene.expected))
    await scene.attack(
        role,
        "INSERT INTO outbox_set_aside (message_id, reason, key_id, signature) VALUES "
        f"('{victim}', 'unroutable: no queue', '{scene.key.public.key_id}', '{'ab' * 64}')",
        f"INSERT INTO outbox_set_aside (message_id, reason) VALUES ('{victim}', 'nacked')",
    )
    assert await scene.ledger.set_aside_messages() == []  # not the service's: not listed
    got, _ = await scene.relay()
    assert _bodies(got) == scene.expected  # the victim's result went out all the same
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"message_id {victim}: signature does not match" in out
    assert f"message_id {victim}: unsigned" in out
    assert out.count("outbox_set_aside forged: id") == 2


async def test_an_edited_set_aside_row_is_reported(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    victim, other = list(scene.expected)[:2]
    await scene.ledger.set_aside({victim: "unroutable: no queue bound"})
    code, out = await scene.cli_verify(capsys)
    assert code == 0, out  # the service's own set-aside rows are information
    assert "1 note(s), not findings" in out
    assert f"message_id {victim}: unroutable: no queue bound (not published)" in out
    await scene.as_owner(
        f"UPDATE outbox_set_aside SET message_id = '{other}' WHERE message_id = '{victim}'"
    )
    assert await scene.ledger.set_aside_messages() == []
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"outbox_set_aside forged: id 1 message_id {other}: signature does not match" in out


async def _rejections_dead_lettered(scene: Scene) -> dict[str, Any]:
    """Reject two messages as the live service does (dead letters in the outbox): one the
    contract refuses, one a settled round refuses. Their outbox rows, by message id."""
    late = json.loads(_feed(12, seed=7)[1])  # a bet of a round settled already
    late["event_id"] = "0b6f1f8e-5a47-4c1e-9a4e-00000000beef"
    settler = Settler(scene.ledger, dead_letters=True)
    bad = [b'{"event_type": "bet.placed"}', json.dumps(late, indent=1).encode()]
    await settler.handle([Inbound(body, n, "t.bet.placed", f"m{n}") for n, body in enumerate(bad)])
    rows = await scene.owner(
        "SELECT message_id, position, event_hash, body::text FROM outbox "
        "WHERE exchange = 'croupier.dead-letter' ORDER BY seq"
    )
    assert len(rows) == 2
    return {row["message_id"]: row for row in rows}


def _inserted_letter(letter: OutboxMessage, beside: Any) -> str:
    """The INSERT of ``letter`` into the outbox, at the event the real dead letter
    ``beside`` names."""
    return (
        "INSERT INTO outbox (message_id, position, exchange, routing_key, body, event_hash) "
        f"VALUES ('{letter.message_id}', {beside['position']}, '{letter.exchange}', "
        f"'{letter.routing_key}', '{canonical_json(letter.body)}', '{beside['event_hash']}')"
    )


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_forged_and_edited_dead_letters_are_refused_and_reported(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    letters = await _rejections_dead_lettered(scene)
    (contract_id, contract), (rule_id, rule) = letters.items()
    kept = json.loads(contract["body"])
    forged = dead_letter(
        kept["fact"], b'{"forged": "mallory"}', "t.bet.placed", "m9", kept["code"], kept["reason"]
    )
    statements = [
        # a dead letter of a real rejection, carrying other bytes (its own delivery is taken)
        _inserted_letter(forged, contract)
    ]
    if role == "owner":  # a real one edited: another reason, other bytes
        edited = {**json.loads(rule["body"]), "reason": "fine", "text": '{"forged":1}'}
        statements.append(
            f"UPDATE outbox SET body = '{canonical_json(edited)}' WHERE message_id = '{rule_id}'"
        )
    await scene.attack(role, *statements)
    bus = MemoryBus()
    bus.subscribe("#", lambda message: None)
    metrics = await scene.relay_onto(bus)
    got = {letter.message_id: letter for letter in bus.dead_letters}
    lying = {forged.message_id} | ({rule_id} if role == "owner" else set())
    assert forged.message_id not in got
    assert {contract_id, rule_id} - lying <= got.keys()
    assert _refused(metrics) == len(lying)
    assert got[contract_id].raw == b'{"event_type": "bet.placed"}'
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"message_id {forged.message_id}: it carries another delivery than" in out
    if role == "owner":
        assert "outbox changed: seq" in out and f"message_id {rule_id}: it differs" in out


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_a_stalled_relay_lease_stops_relaying_visibly_until_it_is_ended(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Availability against the service's credentials is not protected: a lease held far
    beyond any term Croupier takes stops every relay. It shows: the relay is not active,
    says the lease is stalled (metric, readiness), verify names the row; once it is ended,
    relaying resumes with nothing lost."""
    await scene.attack(
        role,
        "INSERT INTO relay_lease (name, holder, expires_at) "
        "VALUES ('outbox-relay', 'mallory', 'infinity')",
    )
    bus, metrics = MemoryBus(), Metrics()
    got: dict[str, Outgoing] = {}
    bus.subscribe("#", lambda message: got.__setitem__(message.message_id, message))
    relay = OutboxRelay(scene.ledger, bus, metrics)
    assert not await relay.hold()
    assert relay.stalled and not relay.active
    assert metrics.registry.get_sample_value("croupier_relay_lease_stalled") == 1
    assert metrics.registry.get_sample_value("croupier_relay_active") == 0
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert "relay_lease forged: outbox-relay holder 'mallory': held for" in out
    await scene.as_app("UPDATE relay_lease SET expires_at = now() WHERE name = 'outbox-relay'")
    assert await relay.hold()
    assert not relay.stalled
    assert metrics.registry.get_sample_value("croupier_relay_lease_stalled") == 0
    await relay.drain()
    assert _bodies(got) == scene.expected
    code, out = await scene.cli_verify(capsys)
    assert code == 0, out


@pytest.mark.parametrize("role", ["app", "owner"])
async def test_a_second_dead_letter_of_a_real_rejection_is_refused_and_reported(
    scene: Scene, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its bytes, code and reason are the real ones; only the delivery differs, and the
    rejection records the delivery its one dead letter carries."""
    letters = await _rejections_dead_lettered(scene)
    statements, seconds = [], {}
    for row in letters.values():
        real = json.loads(row["body"])
        raw = real["text"].encode()
        second = dead_letter(real["fact"], raw, "t.elsewhere", "m99", real["code"], real["reason"])
        seconds[second.message_id] = second
        statements.append(_inserted_letter(second, row))
    await scene.attack(role, *statements)
    bus = MemoryBus()
    bus.subscribe("#", lambda message: None)
    metrics = await scene.relay_onto(bus)
    assert sorted(letter.message_id for letter in bus.dead_letters) == sorted(letters)
    assert _refused(metrics) == 2
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    for message_id in seconds:
        assert f"message_id {message_id}: it carries another delivery than the rejection" in out
    assert out.count("  outbox changed: ") == 2


async def test_a_deleted_dead_letter_is_reported_missing(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    letters = await _rejections_dead_lettered(scene)
    victim = next(iter(letters))
    fact = json.loads(letters[victim]["body"])["fact"]
    await scene.attack("owner", f"DELETE FROM outbox WHERE message_id = '{victim}'")
    code, out = await scene.cli_verify(capsys)
    assert code == 1
    assert f"outbox missing: dead letter of {fact}" in out
    assert "calls for a dead letter, the outbox lacks it" in out


async def test_deleted_publish_marks_stop_the_relay_until_redriven(
    scene: Scene,
    amqp_vhost: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The owner deletes every publish mark and marker. The relay of a restarted service
    republishes none of the history (nor anything after it) and says why; verify exits 1
    naming every message; ``croupier redrive --results --unmarked`` publishes them again
    (the explicit step), after which the relay goes on and verify passes."""
    got, _ = await scene.relay()
    history = set(got)
    assert _bodies(got) == scene.expected
    await settle(scene.ledger, _feed(2, seed=31))  # its heads record the history published
    later = {
        body["message_id"]
        for row in await scene.settled()
        for body in result_bodies(json.loads(row["data"]))
    } - history
    assert later
    await scene.as_owner("DELETE FROM outbox_published", "DELETE FROM outbox_marks")
    async with open_ledger(scene.service_url, scene.key) as restarted:
        bus, metrics = MemoryBus(), Metrics()
        sent: set[str] = set()
        bus.subscribe("#", lambda message: sent.add(message.message_id))
        relay = OutboxRelay(restarted, bus, metrics)
        assert await relay.relay_once() == 0
        assert sent == set() and relay.marks_missing > 0
        assert metrics.registry.get_sample_value("croupier_relay_marks_missing") > 0
        code, out = await scene.cli_verify(capsys)
        assert code == 1
        assert "outbox_published missing: seq" in out and "marks deleted?" in out
        report = await scene.report()
        named = {p.row.rpartition(" ")[2] for p in report.problems if p.kind == "missing"}
        assert named == history
        await prepare_broker(amqp_vhost)
        key_file = str(scene.public_key.with_suffix(".key"))
        monkeypatch.setenv("CROUPIER_LEDGER_SIGNING_KEY", key_file)
        redrive = ["redrive", "--results", "--unmarked", "--ledger", scene.service_url]
        capsys.readouterr()
        argv = [*redrive, "--amqp", amqp_vhost, "--json"]
        assert await asyncio.to_thread(main, argv) == 0
        listed = json.loads(capsys.readouterr().out)
        assert listed["counts"]["redriven"] == len(history)
        wallet = Wallet(amqp_vhost)
        await wallet.wait_for(history, timeout=30)
        assert {m: r.body for m, r in wallet.unique.items()} == scene.expected
        while await relay.relay_once():
            pass
        assert relay.marks_missing == 0 and sent == later
    code, out = await scene.cli_verify(capsys)
    assert code == 0, out
