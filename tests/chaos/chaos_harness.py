"""What the chaos suite and the soak share: a fleet of ``croupier serve`` processes, the
faults, the independent replay, and the harm table.

Harm is measured, never assumed: every figure comes from the ledger, the wallet queue, the
dead-letter queue and a ``croupier replay`` of the same valid feed in a process of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aio_pika
from aio_pika.exceptions import AMQPError
from integration.service.service_harness import (
    ServeProcess,
    Wallet,
    closures,
    http_get,
    ledger_returned,
    played_tables,
    round_streams,
    wallet_paid,
)
from tcp_proxy import TcpProxy

from croupier.bus import DEAD_LETTER_QUEUE, SHA256_HEADER
from croupier.ledger import RecordedEvent
from croupier.settlement.round import REJECTED
from studio.feed import FeedMessage

_DIGEST = re.compile(r"[0-9a-f]{64}")


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (0 if it is gone)."""
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1])
    except OSError:
        pass
    return 0


async def consumed(instance: ServeProcess) -> float:
    """Feed messages this instance consumed so far (its /metrics); -1 if it does not answer."""
    return await metric_sum(instance, "croupier_events_consumed_total{")


async def metric_sum(instance: ServeProcess, prefix: str) -> float:
    """The sum of this instance's samples whose line starts with ``prefix`` (its /metrics);
    -1 if it does not answer."""
    try:
        _, text = await http_get(instance.port, "/metrics", timeout=3)
    except (OSError, TimeoutError):
        return -1
    return sum(float(row.split()[1]) for row in text.splitlines() if row.startswith(prefix))


@dataclass
class Fleet:
    """``croupier serve`` processes on one ledger and broker; the first ready one is active.

    Each instance reaches the database and the broker through TCP proxies of its own, so
    that one can be cut off (:meth:`cut`) while the others are not. ``env``: more variables
    for every instance (``CROUPIER_PARTITIONED=1`` makes the fleet share partitions).
    """

    database_url: str
    amqp_url: str
    logs: Path
    max_batch: int = 200
    env: Mapping[str, str] = field(default_factory=dict)
    instances: list[ServeProcess] = field(default_factory=list)
    started: int = 0
    rss_ready: list[int] = field(default_factory=list)
    proxies: dict[int, tuple[TcpProxy, TcpProxy]] = field(default_factory=dict)

    def spawn(self) -> ServeProcess:
        self.started += 1
        log = self.logs / f"serve-{self.started}.log"
        to_database, to_broker = (
            TcpProxy(_port(url)).start() for url in (self.database_url, self.amqp_url)
        )
        instance = ServeProcess(
            _via(self.database_url, to_database),
            _via(self.amqp_url, to_broker),
            log,
            self.max_batch,
            self.env,
        )
        self.proxies[instance.process.pid] = (to_database, to_broker)
        self.instances.append(instance)
        return instance

    def cut(
        self, instance: ServeProcess, *, off: bool, database: bool = True, broker: bool = True
    ) -> None:
        """Black-hole (``off``) or heal the network between ``instance`` and its services
        (the database, the broker or both)."""
        to_database, to_broker = self.proxies[instance.process.pid]
        for proxy in [to_database] * database + [to_broker] * broker:
            if off:
                proxy.black_hole()
            else:
                proxy.heal()

    async def start(self, count: int) -> None:
        for _ in range(count):
            instance = self.spawn()
            await instance.ready(timeout=120)
            self.rss_ready.append(rss_kib(instance.process.pid))

    def alive(self) -> list[ServeProcess]:
        return [i for i in self.instances if i.process.poll() is None]

    async def active(self, settle: float = 1.0) -> ServeProcess:
        """The instance consuming now: the one whose count moves (or the first that has any)."""
        before = [await consumed(i) for i in self.alive()]
        await asyncio.sleep(settle)
        after = [await consumed(i) for i in self.alive()]
        moving = [i for i, b, a in zip(self.alive(), before, after, strict=True) if a > b]
        if moving:
            return moving[0]
        ranked = sorted(zip(after, self.alive(), strict=True), key=lambda pair: -pair[0])
        return ranked[0][1]

    def stop_all(self) -> None:
        for instance in self.instances:
            if instance.process.poll() is None:
                os.kill(instance.process.pid, signal.SIGCONT)
                instance.process.kill()
                instance.process.wait(30)
        for proxies in self.proxies.values():
            for proxy in proxies:
                proxy.close()

    def rss_now(self) -> list[int]:
        return [rss_kib(i.process.pid) for i in self.alive()]


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None, f"{url} names no port"
    return port


def _via(url: str, proxy: TcpProxy) -> str:
    """``url`` with its port replaced by the proxy's (127.0.0.1)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)
    where = f"127.0.0.1:{proxy.port}"
    return parts._replace(netloc=f"{host[0]}@{where}" if len(host) == 2 else where).geturl()


# -- the independent replay ------------------------------------------------------------------


def replay_results(valid: Sequence[FeedMessage], workdir: Path) -> dict[str, dict[str, Any]]:
    """``croupier replay`` of ``valid`` (a process of its own, a fresh SQLite ledger):
    message_id -> its result body."""
    feed = workdir / "valid-feed.jsonl"
    with feed.open("wb") as out:
        for message in valid:
            out.write(message.body + b"\n")
    results, rejections = workdir / "replay-results.jsonl", workdir / "replay-rejected.jsonl"
    ledger = f"sqlite:///{workdir / 'replay.sqlite'}"
    outputs = ("--out", str(results), "--rejections", str(rejections), "--ledger", ledger)
    done = subprocess.run(
        [sys.executable, "-m", "croupier.cli", "replay", str(feed), *outputs],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, f"croupier replay failed:\n{done.stdout}\n{done.stderr}"
    bodies = [json.loads(row) for row in results.read_text().splitlines()]
    return {body["message_id"]: body for body in bodies}


# -- what reached the dead-letter queue --------------------------------------------------------


@dataclass(frozen=True)
class Parked:
    body: bytes
    message_id: str
    headers: dict[str, Any]


async def take_dead_letters(url: str) -> list[Parked]:
    """Everything in ``croupier.dead-letter``, taken off the queue."""
    connection = await aio_pika.connect(url, timeout=30)
    parked: list[Parked] = []
    try:
        channel = await connection.channel()
        queue = await channel.get_queue(DEAD_LETTER_QUEUE)
        while (message := await queue.get(no_ack=True, fail=False, timeout=30)) is not None:
            headers = dict(message.headers or {})
            parked.append(Parked(message.body, message.message_id or "", headers))
    finally:
        await connection.close()
    return parked


def ledger_knows(events: Iterable[RecordedEvent]) -> tuple[set[str], set[str]]:
    """(digests of raw bodies kept, event ids rejected) in the ledger."""
    digests: set[str] = set()
    rejected: set[str] = set()
    for e in events:
        tail = e.key.rsplit(":", 1)[-1]
        if _DIGEST.fullmatch(tail):
            digests.add(tail)
        if "rejected" in e.type or "dead" in e.type:
            event = e.data.get("event")
            if isinstance(event, dict) and event.get("event_id"):
                rejected.add(str(event["event_id"]))
            if e.data.get("event_id"):
                rejected.add(str(e.data["event_id"]))
    return digests, rejected


def without_record(parked: Iterable[Parked], events: Sequence[RecordedEvent]) -> list[Parked]:
    """Dead letters the ledger has no record of (by raw body digest, the whole message's for
    a letter that carries only its first bytes, or by event id)."""
    digests, rejected = ledger_knows(events)
    return [
        p
        for p in parked
        if str(p.headers.get(SHA256_HEADER) or hashlib.sha256(p.body).hexdigest()) not in digests
        and p.message_id not in rejected
        and _event_id(p.body) not in rejected
    ]


def _event_id(body: bytes) -> str | None:
    try:
        value = json.loads(body).get("event_id")
    except (ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


# -- the table ---------------------------------------------------------------------------------


@dataclass
class Harm:
    """The figures of one run; every one after ``HARM`` must be 0."""

    faults: Counter[str] = field(default_factory=Counter)
    hostile_kinds: int = 0
    hostile_messages: int = 0
    rounds_settled: int = 0
    bets_compared: int = 0
    rss_before_kib: int = 0
    rss_after_kib: int = 0
    lost: int = 0
    doubled: int = 0
    differing: int = 0
    dead_lettered_without_record: int = 0
    #: Bets of other players in rounds that carried a refused message, and those harmed.
    innocent_bets: int = 0
    innocent_harmed: int = 0
    #: More rows to show, after the figures above (name -> value; none is a harm).
    seen: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    HARM = ("lost", "doubled", "differing", "dead_lettered_without_record", "innocent_harmed")

    def harms(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.HARM}

    def render(self, title: str = "chaos run") -> str:
        """The table; the hostile rows only when the feed carried hostile messages."""
        hostile = self.hostile_kinds > 0
        rows = [
            ("faults injected", f"{sum(self.faults.values())}  ({_kinds(self.faults)})"),
            *[("hostile messages", f"{self.hostile_messages} of {self.hostile_kinds} kinds")]
            * hostile,
            ("rounds settled", f"{self.rounds_settled}"),
            ("bets compared with replay", f"{self.bets_compared}"),
            ("lost", f"{self.lost}"),
            ("doubled", f"{self.doubled}"),
            ("differing from replay", f"{self.differing}"),
            ("dead-lettered, no ledger record", f"{self.dead_lettered_without_record}"),
            *[
                ("innocent bets beside a refusal", f"{self.innocent_bets}"),
                ("innocent bets harmed", f"{self.innocent_harmed}"),
            ]
            * hostile,
            ("RSS before", f"{self.rss_before_kib / 1024:.1f} MiB"),
            ("RSS after", f"{self.rss_after_kib / 1024:.1f} MiB"),
            *self.seen.items(),
        ]
        width = max(len(name) for name, _ in rows)
        lines = [f"  {name:<{width}}  {value}" for name, value in rows]
        lines += [f"  ! {note}" for note in self.notes[:20]]
        return "\n".join([title, *lines])


def _kinds(faults: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(faults.items()))


def measure_harm(
    harm: Harm,
    valid: Sequence[FeedMessage],
    events: Sequence[RecordedEvent],
    wallet: Wallet,
    replayed: dict[str, dict[str, Any]],
    parked: Sequence[Parked],
    inside_tables: Collection[str] = frozenset(),
) -> None:
    """Fill ``harm`` from what the ledger, the wallet and the replay hold.

    ``inside_tables``: the tables whose rounds carry a refused message; their bets (the
    replay settled them from the feed without it) are the innocent ones.
    """
    tables = played_tables(m for m in valid if m.event is not None)
    streams = round_streams(tables)
    closed = Counter(e.stream for e in closures(events))
    harm.rounds_settled = sum(1 for s in streams if closed[s])
    missing_rounds = [s for s in streams if not closed[s]]
    twice = [s for s, n in closed.items() if n > 1]
    unique = wallet.unique
    unpaid = [m for m in replayed if m not in unique]
    changed = [r.message_id for r in wallet.received if r.body != unique[r.message_id].body]
    harm.lost = len(missing_rounds) + len(unpaid)
    harm.doubled = len(twice) + len(changed)
    paid, returned = wallet_paid(wallet), ledger_returned(events)
    for currency in paid.keys() | returned.keys():
        # Paid short of what the ledger returned: lost; beyond it: paid twice.
        harm.lost += paid[currency] < returned[currency]
        harm.doubled += paid[currency] > returned[currency]
    if paid != returned:
        harm.notes.append(f"wallet paid {dict(paid)} but the ledger returned {dict(returned)}")
    for message_id, body in replayed.items():
        ours = unique.get(message_id)
        harm.bets_compared += len(body["bets"])
        differs = ours is None or _bets(ours.body) != _bets(body)
        if ours is not None and differs:
            harm.differing += 1
        if body["table_id"] in inside_tables:
            harm.innocent_bets += len(body["bets"])
            harm.innocent_harmed += len(body["bets"]) if differs else 0
    without = without_record(parked, events)
    harm.dead_lettered_without_record = len(without)
    for stream in missing_rounds[:5]:
        harm.notes += [f"round never closed: {stream}", *_what_became_of(stream, events)]
    harm.notes += [f"round closed twice: {s}" for s in twice[:5]]
    harm.notes += [f"result never received: {m}" for m in unpaid[:5]]
    harm.notes += [
        f"dead-lettered without a ledger record: {p.message_id} {_headers(p)} {p.body[:80]!r}"
        for p in without[:5]
    ]


def _what_became_of(stream: str, events: Sequence[RecordedEvent]) -> list[str]:
    """What the ledger holds of a round that never closed: its facts, and every rejection
    of a message of it (quarantines included), so a failed run names its cause without its
    logs."""
    round_id = stream.split(":", 2)[2]
    facts = Counter(e.type for e in events if e.stream == stream)
    lines = [f"  its facts: {dict(facts) or 'none'}"]
    for event in events:
        mentions = event.stream == stream or round_id in str(event.data.get("raw", ""))
        if event.type == REJECTED and mentions:
            lines.append(f"  rejected {event.data.get('code')}: {event.data.get('reason')!s:.160}")
    return lines


def _headers(parked: Parked) -> str:
    wanted = ("x-croupier-code", "x-first-death-reason", "x-croupier-reason")
    return " ".join(f"{k}={str(parked.headers[k])[:60]}" for k in wanted if k in parked.headers)


def _bets(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (b["bet_id"], b["spot"], b["stake"], b["returned"], b["outcome"]) for b in body["bets"]
    )


async def publish_retrying(messages: Sequence[FeedMessage], url: str, timeout: float = 180) -> None:
    """Publish (confirmed), retrying while the broker is down or restarting."""
    from studio.publisher import publish

    deadline = time.monotonic() + timeout
    while True:
        try:
            assert await publish(messages, url) == len(messages)
            return
        except (OSError, AMQPError, TimeoutError, ConnectionError):
            assert time.monotonic() < deadline, "could not publish to the broker"
            await asyncio.sleep(1)


async def received(wallet: Wallet, message_ids: Iterable[str], timeout: float) -> None:
    """Drain until every result arrived or ``timeout`` passed; what is missing is counted."""
    wanted = set(message_ids)
    deadline = time.monotonic() + timeout
    while wanted - wallet.unique.keys() and time.monotonic() < deadline:
        await wallet.drain()
        await asyncio.sleep(0.5)
    await asyncio.sleep(2)
    await wallet.drain()  # and any copy published late


def in_chunks(feed: Sequence[FeedMessage], count: int) -> list[list[FeedMessage]]:
    """``feed`` cut in order into ``count`` chunks (the last may be shorter)."""
    step = -(-len(feed) // count)
    return [list(feed[i : i + step]) for i in range(0, len(feed), step)]
