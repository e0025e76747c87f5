"""``croupier redrive``: re-publish parked messages to the feed once their cause is fixed.

Takes up to ``--limit`` messages off ``croupier.dead-letter``. Those the broker dead-lettered
(delivery limit, expiry, ...; the ledger records each as a ``feed.dead_lettered`` fact) are
published to ``studio.feed`` again with their original routing key, body and message id,
confirmed, then removed from the dead-letter queue. Croupier's own rejections stay parked
(their verdict would not change) unless ``--all``; the dead letter of an over-size message,
which carries only the first bytes of it (``x-original-size`` header), stays parked always.
Idempotent: the service settles a
message it has seen before as a no-op. ``--dry-run`` lists and changes nothing.

``--results`` publishes the messages the relay set aside instead, under the relay's own
rule: only set-aside rows the service's key signed (``CROUPIER_LEDGER_SIGNING_KEY``, needed
for a ledger with signed heads) count, and each message is published as re-derived from the
chained fact it names (``relay.derive``). Anything else (a forged or edited outbox or
set-aside row) is refused, listed with why, published never; the command then exits 1.

``--results --unmarked`` publishes instead the messages whose publish marks are gone
although a signed head records them published (``croupier verify`` names them
``outbox_published missing``; the relay stops on them, NOT READY, and republishes nothing
by itself), re-derived the same way, and marks them published again: the explicit step
that lets the relay go on. Wallets receive those results a second time, with the same
message ids, and deduplicate them.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import asdict, dataclass
from typing import Any

import aio_pika

from croupier.bus import (
    CODE_HEADER,
    DEAD_LETTER_QUEUE,
    FEED_EXCHANGE,
    SIZE_HEADER,
    Outgoing,
)
from croupier.bus.amqp import AmqpBus, as_parked
from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    bounded_int,
    ledger_at,
    ledger_of,
    print_json,
    signing_key,
    signing_keyring,
)
from croupier.config import settings
from croupier.errors import CommandError, ExitCode, reaching
from croupier.ledger import Ledger
from croupier.settlement.relay import derive


@dataclass
class Listed:
    """One parked message as listed."""

    message_id: str | None
    routing_key: str
    reason: str
    action: str  # "redriven", "would redrive", "kept", "refused"


def register(subparsers: Any) -> None:
    """Add the ``redrive`` sub-command."""
    parser = subparsers.add_parser("redrive", description=__doc__)
    parser.add_argument("--amqp", metavar="URL", help="the broker (default CROUPIER_AMQP_URL)")
    add_ledger_argument(parser)
    parser.add_argument(
        "--limit", type=bounded_int(1, 1_000_000), default=10_000, help="messages at most"
    )
    parser.add_argument("--dry-run", action="store_true", help="list; change nothing")
    parser.add_argument("--all", action="store_true", help="also Croupier's own rejections")
    parser.add_argument(
        "--results", action="store_true", help="publish the results the relay set aside"
    )
    parser.add_argument(
        "--unmarked",
        action="store_true",
        help="with --results: publish again the results whose publish marks are gone",
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Redrive and list what was done; 2 when the broker or ledger cannot be reached."""
    broker = args.amqp or settings().amqp_url
    with reaching(
        broker=broker,
        broker_setting="--amqp" if args.amqp else "CROUPIER_AMQP_URL or --amqp",
    ):
        if args.results:
            listed = asyncio.run(_redrive_results(ledger_of(args), broker, args))
        else:
            listed = asyncio.run(_redrive(broker, args))
    _print(listed, args.json)
    return ExitCode.FINDING if any(p.action == "refused" for p in listed) else ExitCode.OK


async def _redrive(url: str, args: argparse.Namespace) -> list[Listed]:
    connection = await aio_pika.connect(url, timeout=30)
    listed: list[Listed] = []
    try:
        taking = await connection.channel()
        publishing = await connection.channel(publisher_confirms=True)
        queue = await taking.get_queue(DEAD_LETTER_QUEUE)
        feed = await publishing.get_exchange(FEED_EXCHANGE)
        while len(listed) < args.limit:
            message = await queue.get(no_ack=False, fail=False, timeout=10)
            if message is None:
                break
            listed.append(await _one(message, feed, args))
        await taking.close()  # what was not acknowledged goes back to the queue
    finally:
        await connection.close()
    return listed


async def _one(
    message: aio_pika.abc.AbstractIncomingMessage,
    feed: aio_pika.abc.AbstractExchange,
    args: argparse.Namespace,
) -> Listed:
    copy = as_parked(message)
    ours = copy.reason is None  # Croupier dead-lettered it: the ledger has it already
    reason = str((message.headers or {}).get(CODE_HEADER)) if ours else str(copy.reason)
    routing_key = copy.routing_key
    listed = Listed(message.message_id, routing_key, reason, "kept")
    if ours and (not args.all or SIZE_HEADER in (message.headers or {})):
        return listed  # a cut letter is not the message: re-publishing it could only mislead
    if args.dry_run:
        listed.action = "would redrive"
        return listed
    again = aio_pika.Message(
        message.body,
        message_id=message.message_id,
        content_type=message.content_type or "application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
    )
    await feed.publish(again, routing_key=routing_key)  # confirmed before the ack
    await message.ack()
    listed.action = "redriven"
    return listed


async def _redrive_results(
    ledger_url: str, amqp_url: str, args: argparse.Namespace
) -> list[Listed]:
    key = signing_key(settings().ledger_signing_key, required=False)
    keyring = signing_keyring(settings().ledger_keyring, key)
    async with ledger_at(ledger_url, key=key, keyring=keyring) as ledger:
        if key is None and args.unmarked:
            raise CommandError(
                "--unmarked publishes results again and signs their publish marks with the "
                "service's key",
                "set CROUPIER_LEDGER_SIGNING_KEY to the service's key file",
            )
        if key is None and await ledger.signed():
            raise CommandError(
                "this ledger's heads are signed: set-aside rows and results are checked, "
                "and publish marks signed, with the service's key",
                "set CROUPIER_LEDGER_SIGNING_KEY to the service's key file",
            )
        choose = _unmarked if args.unmarked else _set_aside
        listed, sendable = await choose(ledger, args.limit)
        if args.dry_run or not sendable:
            return listed
        bus = AmqpBus(amqp_url)
        await bus.connect_publisher()
        try:
            refused = {r.message_id: r for r in await bus.publish(list(sendable.values()))}
        finally:
            await bus.close()
        await ledger.mark_published([i for i in sendable if i not in refused])
        for entry in listed:
            if entry.message_id not in sendable:
                continue
            refusal = refused.get(entry.message_id)
            entry.action = "kept" if refusal else "redriven"
            if refusal:
                entry.reason = f"{refusal.kind}: {refusal.reason}"
    return listed


async def _set_aside(ledger: Ledger, limit: int) -> tuple[list[Listed], dict[str, Outgoing]]:
    """The set-aside messages, each listed as to redrive or refused (why), and what to
    publish for the former, by id: the relay's rule, on rows the service's key signed."""
    rows = await ledger.set_aside_rows(limit)
    signed = {m.message_id for m, row in rows if ledger.trust.trusts_aside(row, m.position)}
    messages = list({m.message_id: (m, row.reason) for m, row in rows}.values())
    sendable, refused = await derive(ledger, [m for m, _ in messages if m.message_id in signed])
    listed = []
    for message, reason in messages:
        why = refused.get(message.message_id)
        if message.message_id not in signed:
            why = "set aside by no row the service's key signed"
        entry = Listed(message.message_id, message.routing_key, reason, "would redrive")
        if why is not None:
            entry.reason, entry.action = f"refused: {why}", "refused"
        listed.append(entry)
    return listed, sendable


async def _unmarked(ledger: Ledger, limit: int) -> tuple[list[Listed], dict[str, Outgoing]]:
    """The pending messages a signed head records published (their marks gone), each listed
    as to redrive or refused (why), and what to publish for the former: the relay's rule."""
    claim = await ledger.published_claim()
    lost = [m for m in await ledger.pending_outbox(limit) if m.seq <= claim and not m.aside]
    sendable, refused = await derive(ledger, lost)
    listed = []
    for message in lost:
        why = f"publish mark missing (the outbox is recorded published through seq {claim})"
        entry = Listed(message.message_id, message.routing_key, why, "would redrive")
        if message.message_id in refused:
            entry.reason, entry.action = f"refused: {refused[message.message_id]}", "refused"
        listed.append(entry)
    return listed, sendable


def _print(listed: list[Listed], as_json: bool) -> None:
    counts = {action: sum(p.action == action for p in listed) for action in ("redriven", "kept")}
    counts["would redrive"] = sum(p.action == "would redrive" for p in listed)
    counts["refused"] = sum(p.action == "refused" for p in listed)
    if as_json:
        print_json({"counts": counts, "messages": [asdict(p) for p in listed]})
        return
    for p in listed:
        print(f"{p.action:<14} {p.message_id or '-':<40} {p.routing_key:<40} {p.reason}")
    print(", ".join(f"{n} {action}" for action, n in counts.items()))
