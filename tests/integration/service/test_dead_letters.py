"""Bad input and bad luck on the live service: dead letters, quarantine, unroutable results.

Malformed JSON, a contract-invalid event, an over-size message and a rule-rejected event
each end in ``croupier.dead-letter`` with their reason and code in headers (an over-size one
as its first ``KEPT_BYTES`` with its size and SHA-256, left parked by ``croupier redrive``),
and are kept in the ledger (contract rejections in the ``rejections`` stream with the raw
message, rule rejections in the round's stream as ``feed.rejected``). A message settlement
itself fails on is quarantined the same way and the consumer goes on. A result no queue is
bound for is counted, stays in the outbox, and is published once a queue is bound.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from croupier_feeds import RoundFeed, line
from service_harness import (
    WALLET_QUEUE,
    Wallet,
    eventually,
    http_get,
    ledger_events,
    metric,
    prepare_broker,
    serving,
)

from croupier.bus import (
    CODE_HEADER,
    DEAD_LETTER_QUEUE,
    FEED_QUEUE,
    KEPT_BYTES,
    REASON_HEADER,
    SETTLEMENTS_EXCHANGE,
    SHA256_HEADER,
    SIZE_HEADER,
    Outgoing,
    Refused,
)
from croupier.cli import main
from croupier.ledger import open_ledger
from croupier.settlement.deadletters import DEAD_LETTERED, DEAD_LETTERS_STREAM
from croupier.settlement.results import message_id
from croupier.settlement.round import REJECTED, SETTLED, stream_name
from croupier.settlement.service import Service
from croupier.settlement.settler import REJECTIONS_STREAM, Inbound
from studio.feed import FeedMessage
from studio.publisher import publish

pytestmark = pytest.mark.integration


@pytest.fixture
async def service(amqp_vhost: str, postgres_database: str) -> AsyncIterator[Service]:
    """The service on the test's vhost and database (nothing bound to its results yet)."""
    async with open_ledger(postgres_database) as ledger, serving(ledger, amqp_vhost) as running:
        yield running


def feed_message(event: dict[str, Any]) -> FeedMessage:
    """A valid-looking feed message for ``event`` (as the studio would send it)."""
    return FeedMessage(
        f"{event['table_id']}.{event['event_type']}",
        line(event).encode(),
        event["event_id"],
        event,
        event["table_id"],
    )


def raw_message(body: bytes, routing_key: str = "t-bad.round.opened") -> FeedMessage:
    return FeedMessage(routing_key, body, str(uuid.uuid4()), None, "t-bad")


def a_round(feed: RoundFeed, *, wrong_call: bool = False) -> list[dict[str, Any]]:
    """A Casino Hold'em round of one player who calls; optionally a 3x call first."""
    events = [
        feed.opened(),
        feed.bet("a1"),
        feed.hole("As Ad"),
        feed.cards("dealer", "9c 9d"),
        feed.cards("board", "Ah 7c 2d"),
    ]
    if wrong_call:
        events.append(feed.decide("a1", "flop", "call", "c0", 300))
    events += [
        feed.decide("a1", "flop", "call", "c1", 200),
        feed.cards("board", "Ks 4h"),
        feed.completed(),
    ]
    return events


async def take_dead_letters(
    url: str, count: int, timeout: float = 60
) -> list[AbstractIncomingMessage]:
    """``count`` messages off ``croupier.dead-letter`` (fails if fewer arrive in time)."""
    connection = await aio_pika.connect(url, timeout=30)
    taken: list[AbstractIncomingMessage] = []
    try:
        channel = await connection.channel()
        queue = await channel.get_queue(DEAD_LETTER_QUEUE)

        async def enough() -> bool:
            while (message := await queue.get(no_ack=True, fail=False, timeout=10)) is not None:
                taken.append(message)
            return len(taken) >= count

        await eventually(enough, timeout, f"{count} dead letters")
    finally:
        await connection.close()
    return taken


async def metrics_text(service: Service) -> str:
    assert service.http_port
    status, text = await http_get(service.http_port, "/metrics")
    assert status == 200
    return text


def labelled(text: str, name: str, **labels: str) -> float:
    """The value of ``name{labels}`` in a Prometheus exposition (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for row in text.splitlines():
        if row.startswith(f"{name}{{{wanted}}} "):
            return float(row.split()[-1])
    return 0.0


async def test_rejected_input_is_dead_lettered_with_its_reason_and_kept_in_the_ledger(
    service: Service, amqp_vhost: str, postgres_database: str
) -> None:
    await prepare_broker(amqp_vhost)
    feed = RoundFeed(table_id="t-dl", round_id="r1")
    good = a_round(feed, wrong_call=True)
    bad_card = RoundFeed(table_id="t-dl", round_id="r2").make(
        "cards.dealt", {"target": "board", "cards": ["Ax"]}
    )
    malformed = raw_message(b'{"event_id": "torn')
    messages = [
        feed_message(good[0]),
        malformed,
        feed_message(bad_card),
        *(feed_message(e) for e in good[1:]),
    ]
    wrong_call = good[5]

    assert await publish(messages, amqp_vhost) == len(messages)
    letters = await take_dead_letters(amqp_vhost, 3)
    await Wallet(amqp_vhost).wait_for([message_id("t-dl", "r1", "p1", "EUR")], timeout=60)

    by_id = {m.message_id: m for m in letters}
    assert by_id.keys() == {malformed.event_id, bad_card["event_id"], wrong_call["event_id"]}
    for letter in letters:
        assert letter.headers[CODE_HEADER]
        assert letter.headers[REASON_HEADER]
    assert by_id[malformed.event_id].body == malformed.body
    assert by_id[malformed.event_id].headers[CODE_HEADER] == "not_json"
    assert "not valid JSON" in str(by_id[malformed.event_id].headers[REASON_HEADER])
    assert by_id[bad_card["event_id"]].headers[CODE_HEADER] == "contract"
    assert "Ax" in str(by_id[bad_card["event_id"]].headers[REASON_HEADER])
    wrong = by_id[wrong_call["event_id"]]
    assert wrong.headers[CODE_HEADER] == "wrong_wager_size"
    assert "exactly" in str(wrong.headers[REASON_HEADER])
    assert wrong.routing_key == "t-dl.decision.made"
    assert json.loads(wrong.body) == wrong_call

    events = await ledger_events(postgres_database)
    kept = [e for e in events if e.stream == REJECTIONS_STREAM]
    assert [(e.data["raw"], e.data["code"]) for e in kept] == [
        (malformed.body.decode(), "not_json")
    ]
    # the refused card reads as seq 1 of round r2: it is kept there, in its place
    (refused,) = [e for e in events if e.stream == stream_name("t-dl", "r2")]
    assert (refused.type, refused.data["raw"], refused.data["code"]) == (
        REJECTED,
        line(bad_card),
        "contract",
    )
    assert (refused.data["seq"], refused.data["uses_seq"]) == (1, True)
    round_facts = [e for e in events if e.stream == stream_name("t-dl", "r1")]
    rejected = [e for e in round_facts if e.type == REJECTED]
    assert [e.data["event"]["event_id"] for e in rejected] == [wrong_call["event_id"]]
    assert rejected[0].data["code"] == "wrong_wager_size"
    assert round_facts[-1].type == SETTLED  # the rest of the round is unaffected

    text = await metrics_text(service)
    assert labelled(text, "croupier_events_rejected_total", code="contract") == 1
    assert labelled(text, "croupier_events_rejected_total", code="not_json") == 1
    assert labelled(text, "croupier_events_rejected_total", code="wrong_wager_size") == 1
    assert labelled(text, "croupier_dead_lettered_total", code="contract") == 1
    assert labelled(text, "croupier_dead_lettered_total", code="not_json") == 1


async def test_a_poison_message_is_quarantined_and_the_consumer_goes_on(
    service: Service, amqp_vhost: str, postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await prepare_broker(amqp_vhost)
    poison = RoundFeed(table_id="t-poison", round_id="r1").opened()
    settle = service.settler.handle

    async def handle(batch: Sequence[Inbound]) -> Any:
        if any(poison["event_id"].encode() in message.body for message in batch):
            raise RuntimeError("settlement blew up on this message")
        return await settle(batch)

    monkeypatch.setattr(service.settler, "handle", handle)
    before, after = a_round(RoundFeed("t-ok", "r1")), a_round(RoundFeed("t-ok", "r2"))
    messages = [feed_message(e) for e in (*before[:4], poison, *before[4:], *after)]

    assert await publish(messages, amqp_vhost) == len(messages)
    results = [message_id("t-ok", r, "p1", "EUR") for r in ("r1", "r2")]
    await Wallet(amqp_vhost).wait_for(results, timeout=60)
    (letter,) = await take_dead_letters(amqp_vhost, 1)

    assert letter.message_id == poison["event_id"]
    assert letter.headers[CODE_HEADER] == "poison"
    assert "settlement blew up" in str(letter.headers[REASON_HEADER])
    events = await ledger_events(postgres_database)
    (kept,) = [e for e in events if e.stream == REJECTIONS_STREAM]
    assert kept.data["code"] == "poison"
    assert kept.data["raw"] == line(poison)
    assert all(e.stream != stream_name("t-poison", "r1") for e in events)
    assert service.consumer.healthy
    text = await metrics_text(service)
    assert labelled(text, "croupier_dead_lettered_total", code="poison") == 1


async def test_an_unroutable_result_is_set_aside_counted_once_and_blocks_nothing(
    service: Service,
    amqp_vhost: str,
    postgres_database: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    unrouted = message_id("t-unrouted", "r1", "p1", "EUR")
    connection = await aio_pika.connect(amqp_vhost, timeout=30)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(WALLET_QUEUE, durable=True)
        await queue.bind(SETTLEMENTS_EXCHANGE, routing_key="EUR.p2")  # p1 has no wallet
    finally:
        await connection.close()
    first = a_round(RoundFeed("t-unrouted", "r1"))
    assert await publish([feed_message(e) for e in first], amqp_vhost) == len(first)

    async def counted() -> bool:
        return metric(await metrics_text(service), "croupier_results_unroutable_total") >= 1

    await eventually(counted, 60, "the unroutable result is set aside and counted")
    later = [dict(e) for e in a_round(RoundFeed("t-routed", "r1"))]
    for e in later:
        if e["event_type"] == "bet.placed":
            e["payload"] = {**e["payload"], "player_id": "p2"}
    assert await publish([feed_message(e) for e in later], amqp_vhost) == len(later)
    wallet = Wallet(amqp_vhost)
    await wallet.wait_for([message_id("t-routed", "r1", "p2", "EUR")], timeout=60)

    await asyncio.sleep(2)  # several relay rounds: the set-aside result is not retried
    text = await metrics_text(service)
    assert metric(text, "croupier_results_unroutable_total") == 1
    assert labelled(text, "croupier_results_set_aside_total", kind="unroutable") == 1
    assert metric(text, "croupier_results_published_total") == 1
    assert await service.ledger.pending_outbox(10) == []
    (aside, why), *_ = await service.ledger.set_aside_messages()
    assert aside.message_id == unrouted and why.startswith("unroutable")
    status, body = await http_get(service.http_port or 0, "/readyz")
    assert status == 200, body

    # Once p1's wallet is bound, the operator publishes what was set aside (with the
    # service's key: the set-aside rows and the publish marks are signed).
    await prepare_broker(amqp_vhost)
    assert service.ledger.trust.key is not None
    private, _ = service.ledger.trust.key.write(tmp_path / "keys")
    monkeypatch.setenv("CROUPIER_LEDGER_SIGNING_KEY", str(private))
    redrive = ["redrive", "--results", "--ledger", postgres_database, "--amqp", amqp_vhost]
    capsys.readouterr()
    assert await asyncio.to_thread(main, [*redrive, "--json"]) == 0
    assert printed_json(capsys)["counts"]["redriven"] == 1
    await wallet.wait_for([unrouted], timeout=60)
    assert await service.ledger.set_aside_messages() == []


async def test_readiness_reflects_a_relay_that_cannot_publish(
    service: Service, amqp_vhost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = await aio_pika.connect(amqp_vhost, timeout=30)
    try:
        channel = await connection.channel()
        await channel.exchange_delete(SETTLEMENTS_EXCHANGE)  # publishing now closes channels
        events = a_round(RoundFeed("t-noexchange", "r1"))
        assert await publish([feed_message(e) for e in events], amqp_vhost) == len(events)

        async def not_ready() -> bool:
            status, body = await http_get(service.http_port or 0, "/readyz")
            return status == 503 and "relay: NOT READY" in body

        await eventually(not_ready, 60, "/readyz reports the relay")
        # Hold the relay's next publish back while the exchange and the wallet's binding
        # come back, so that the result is not published between the two, unroutable.
        restored = asyncio.Event()
        publish_now = service.relay.sink.publish

        async def after_restore(messages: Sequence[Outgoing]) -> list[Refused]:
            await restored.wait()
            return await publish_now(messages)

        monkeypatch.setattr(service.relay.sink, "publish", after_restore)
        await prepare_broker(amqp_vhost)
        restored.set()
    finally:
        await connection.close()
    await Wallet(amqp_vhost).wait_for([message_id("t-noexchange", "r1", "p1", "EUR")], 60)

    async def ready() -> bool:
        return (await http_get(service.http_port or 0, "/readyz"))[0] == 200

    await eventually(ready, 30, "/readyz is 200 again once the relay publishes")


async def test_what_the_broker_dead_letters_is_recorded_and_redriven(
    amqp_vhost: str, postgres_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await prepare_broker(amqp_vhost)
    events = a_round(RoundFeed("t-limit", "r1"))
    huge = raw_message(b'{"pad":"' + b"h" * (100 * 1024) + b'"}', "t-limit.bet.placed")
    messages = [*(feed_message(e) for e in events), huge]
    assert await publish(messages, amqp_vhost) == len(messages)
    await _nack_until_dead_lettered(amqp_vhost, len(messages))  # delivery_limit, by the broker

    async with open_ledger(postgres_database) as ledger, serving(ledger, amqp_vhost) as running:

        async def recorded() -> bool:
            facts = await ledger.read_stream(DEAD_LETTERS_STREAM)
            return len(facts) == len(messages)

        await eventually(recorded, 60, "every broker dead letter recorded in the ledger")
        facts = await ledger.read_stream(DEAD_LETTERS_STREAM)
        assert {f.type for f in facts} == {DEAD_LETTERED}
        assert {f.data["code"] for f in facts} == {"delivery_limit"}
        assert {f.data["message_id"] for f in facts} == {m.event_id for m in messages}
        kept = huge.body[:KEPT_BYTES].decode()  # an over-size copy: its first bytes, named
        assert {f.data["raw"] for f in facts} == {line(e) for e in events} | {kept}
        (cut,) = [f.data for f in facts if f.data["raw"] == kept]
        assert cut["size"] == len(huge.body)
        assert cut["sha256"] == hashlib.sha256(huge.body).hexdigest() and cut["event_id"] is None
        assert "croupier redrive" in facts[0].data["reason"]
        text = await metrics_text(running)
        assert labelled(text, "croupier_events_rejected_total", code="delivery_limit") == 9

        listed = await asyncio.to_thread(main, ["redrive", "--amqp", amqp_vhost, "--dry-run"])
        assert listed == 0 and "9 would redrive" in capsys.readouterr().out
        redrive = ["redrive", "--amqp", amqp_vhost, "--json"]
        assert await asyncio.to_thread(main, redrive) == 0
        assert printed_json(capsys)["counts"]["redriven"] == 9
        await Wallet(amqp_vhost).wait_for([message_id("t-limit", "r1", "p1", "EUR")], 60)
        assert await asyncio.to_thread(main, redrive) == 0  # nothing left: idempotent
        assert printed_json(capsys)["counts"]["redriven"] == 0
        round_facts = await ledger.read_stream(stream_name("t-limit", "r1"))
        assert round_facts[-1].type == SETTLED


async def test_an_over_size_message_is_kept_and_dead_lettered_cut_and_never_redriven(
    service: Service, amqp_vhost: str, postgres_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await prepare_broker(amqp_vhost)
    # 100 KiB, cut inside a two-byte character: the letter carries the cut as base64
    huge = raw_message(b'{"event_id":"' + b"\xc3\xa9" * (50 * 1024) + b'"}')
    torn = raw_message(b'{"event_id": "torn')
    assert await publish([huge, torn], amqp_vhost) == 2

    async def both_parked() -> bool:
        return await _parked(amqp_vhost) == 2

    await eventually(both_parked, 60, "both messages dead-lettered")
    listing = ["redrive", "--amqp", amqp_vhost, "--all", "--dry-run", "--json"]
    assert await asyncio.to_thread(main, listing) == 0
    actions = {m["message_id"]: m["action"] for m in printed_json(capsys)["messages"]}
    assert actions == {huge.event_id: "kept", torn.event_id: "would redrive"}

    letters = {m.message_id: m for m in await take_dead_letters(amqp_vhost, 2)}
    cut = letters[huge.event_id]
    digest = hashlib.sha256(huge.body).hexdigest()
    assert cut.body == huge.body[:KEPT_BYTES]
    assert cut.headers[CODE_HEADER] == "too_large"
    assert cut.headers[SIZE_HEADER] == str(len(huge.body))
    assert cut.headers[SHA256_HEADER] == digest
    assert letters[torn.event_id].body == torn.body
    assert SIZE_HEADER not in letters[torn.event_id].headers

    kept = {e.data["code"]: e for e in await ledger_events(postgres_database)}
    assert kept["too_large"].data["raw"] == huge.body[:KEPT_BYTES].decode(errors="replace")
    assert (kept["too_large"].data["size"], kept["too_large"].data["sha256"]) == (
        len(huge.body),
        digest,
    )
    assert kept["too_large"].key.endswith(digest)


async def _parked(url: str) -> int:
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(DEAD_LETTER_QUEUE, passive=True)
        return queue.declaration_result.message_count or 0
    finally:
        await connection.close()


def printed_json(capsys: pytest.CaptureFixture[str]) -> Any:
    """The JSON document a command printed (after any log lines of the service in process)."""
    out = capsys.readouterr().out
    return json.loads(out[out.index("{\n") :])


async def _nack_until_dead_lettered(url: str, count: int) -> None:
    """Consume the feed queue and requeue every delivery until the broker parks them all."""
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=count)
        queue = await channel.get_queue(FEED_QUEUE)

        async def refuse(message: AbstractIncomingMessage) -> None:
            await message.nack(requeue=True)

        await queue.consume(refuse)

        async def parked() -> bool:
            stats = await channel.declare_queue(DEAD_LETTER_QUEUE, passive=True)
            return (stats.declaration_result.message_count or 0) >= count

        await eventually(parked, 60, f"{count} messages parked by the delivery limit")
    finally:
        await connection.close()
