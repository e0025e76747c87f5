"""Scale-out on one machine: ``croupier demo --instances N`` runs N ``croupier serve``
processes in partitioned mode (``CROUPIER_PARTITIONED=1``, the routed feed) sharing the
partitions of one PostgreSQL ledger, fed by the simulated studio over RabbitMQ.

Guarantees:
- **No fallback.** A fleet needs RabbitMQ and PostgreSQL: when either does not answer, or
  the ledger's database or the vhost is missing, the demo (``floor.demo``) stops before
  starting any instance, saying what is missing and how to start or create it. It never
  plays embedded instead.
- **A vhost in the routed mode.** A vhost carries one feed topology (docs/scale.md): the
  fleet plays on the vhost of ``CROUPIER_AMQP_URL`` when set, else on the local broker's
  vhost :data:`FLEET_VHOST`, and refuses a vhost that holds the single-queue feed
  (``croupier.feed``, declared there by the single-instance demo or service). Like the
  demo's database, that vhost is made once by hand and kept; the ledger is the live demo's
  (``croupier``, or ``CROUPIER_DATABASE_URL``), kept, each run under its own table ids.
- **Each instance its own** process, port for ``/metrics`` and ``/readyz``, instance id and
  log file (``var/demo-instance-<n>.log``, replaced each run); all sign with the demo's key
  and use the configured partition term (``CROUPIER_PARTITION_TERM``).
- **Stopped gracefully.** Every instance still running gets SIGTERM and has
  :data:`STOP_SECONDS` to exit 0 (otherwise it is killed and the run fails); each releases
  its leases on the way out, and the run fails if any is still held by one of them.
- With ``kill_one``, :meth:`Fleet.kill_one` SIGKILLs the instance holding the most
  partitions (on a tie, the one that settled the most): its leases run out within the
  term and the others take them, and the run waits for that (:meth:`Fleet.handed_over`)
  before it ends.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import quote, urlsplit, urlunsplit

import aio_pika
import aiormq

from croupier.bus import FEED_QUEUE
from croupier.config import Settings
from croupier.errors import CommandError, reaching
from croupier.ledger import Ledger

#: The local broker's vhost for the fleet when ``CROUPIER_AMQP_URL`` is not set.
FLEET_VHOST: Final = "croupier-partitioned"
#: Seconds an instance has to exit after SIGTERM (``deploy/compose.yaml`` gives 15).
STOP_SECONDS: Final = 15.0
#: Seconds the instances have to start and answer ``/readyz``.
READY_SECONDS: Final = 60.0
_CONSUMED: Final = re.compile(r"^croupier_events_consumed_total\{[^}]*\} ([0-9.e+]+)$", re.M)


def fleet_broker(settings: Settings) -> str:
    """The broker URL the fleet plays on: ``CROUPIER_AMQP_URL``, else :data:`FLEET_VHOST`."""
    if settings.amqp_configured:
        return settings.amqp_url
    parts = urlsplit(settings.amqp_url)
    return urlunsplit(parts._replace(path=f"/{quote(FLEET_VHOST, safe='')}"))


async def check_vhost(broker: str) -> None:
    """The vhost answers and does not carry the single-queue feed."""
    with reaching(broker=broker, broker_setting="CROUPIER_AMQP_URL"):
        connection = await aio_pika.connect(broker, timeout=30)
    try:
        channel = await connection.channel()
        try:
            await channel.declare_queue(FEED_QUEUE, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return
    finally:
        await connection.close()
    vhost = urlsplit(broker).path[1:] or "/"
    raise CommandError(
        f"the vhost {vhost!r} carries the single-queue feed ({FEED_QUEUE}), and a vhost "
        "carries one mode: the partitioned demo needs a vhost of its own",
        f"create one (`rabbitmqctl add_vhost {FLEET_VHOST}` and `rabbitmqctl set_permissions "
        f"-p {FLEET_VHOST} guest '.*' '.*' '.*'`) and unset CROUPIER_AMQP_URL or name it there",
    )


@dataclass
class Instance:
    """One ``croupier serve`` process of the fleet."""

    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes]
    killed: bool = False
    #: The most partitions it was seen holding, and the messages it last said it settled.
    most: int = 0
    settled: int = 0

    def holds(self, owner: str | None) -> bool:
        """Whether a lease's ``owner`` is this process (an instance id is host:pid:random)."""
        return owner is not None and f":{self.process.pid}:" in owner


@dataclass
class Fleet:
    """N partitioned ``croupier serve`` processes on one ledger and vhost."""

    count: int
    database_url: str
    broker: str
    key_file: Path
    folder: Path = Path("var")
    instances: list[Instance] = field(default_factory=list)

    def start(self) -> None:
        """Start every instance, together (they count each other before their first take)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for n in range(1, self.count + 1):
            port = free_port()
            log = self.folder / f"demo-instance-{n}.log"
            log.unlink(missing_ok=True)
            process = serve_partitioned(self.database_url, self.broker, self.key_file, port, log)
            self.instances.append(Instance(f"i{n}", port, log, process))

    async def ready(self) -> None:
        """Wait until every instance answers ``/readyz``; one that exits fails the run."""
        for instance in self.instances:
            try:
                async with asyncio.timeout(READY_SECONDS):
                    while (await _get(instance.port, "/readyz"))[0] != 200:
                        if instance.process.poll() is not None:
                            raise CommandError(
                                f"instance {instance.name} (croupier serve) exited with "
                                f"{instance.process.returncode} at start",
                                f"see {instance.log}",
                            )
                        await asyncio.sleep(0.2)
            except TimeoutError:
                raise CommandError(
                    f"instance {instance.name} (croupier serve) not ready within "
                    f"{READY_SECONDS:.0f} s",
                    f"see {instance.log}",
                ) from None

    async def holdings(self, ledger: Ledger) -> tuple[Counter[str], int]:
        """Partitions held (unexpired lease) per instance name, and those nobody holds."""
        leases = await ledger.partition_leases().leases()
        held: Counter[str] = Counter()
        for lease in leases:
            for instance in self.instances:
                if lease.expires_in > 0 and instance.holds(lease.owner):
                    held[instance.name] += 1
        return held, len(leases) - sum(held.values())

    async def status(self, ledger: Ledger) -> str:
        """One line: what each instance holds, as ``croupier partitions`` shows it, and the
        feed messages it settled (its ``/metrics``)."""
        held, unowned = await self.holdings(ledger)
        parts = []
        for instance in self.instances:
            n = held[instance.name]
            instance.most = max(instance.most, n)
            if instance.killed:
                parts.append(f"{instance.name} killed" + (f", {n} leases to run out" if n else ""))
                continue
            instance.settled = await _settled(instance.port, instance.settled)
            parts.append(f"{instance.name} {n:>3} partitions {instance.settled:>7,} settled")
        if unowned:
            parts.append(f"{unowned} unowned")
        return "  instances: " + " | ".join(parts)

    async def kill_one(self, ledger: Ledger) -> Instance:
        """SIGKILL the live instance holding the most partitions (of those, the one that
        settled the most)."""
        held, _ = await self.holdings(ledger)
        victim = max(self.live(), key=lambda i: (held[i.name], i.settled))
        victim.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(victim.process.wait)
        victim.killed = True
        return victim

    async def handed_over(self, ledger: Ledger) -> bool:
        """Every partition is held by a live instance (a killed one's taken by the others)."""
        held, unowned = await self.holdings(ledger)
        return unowned == 0 and not any(held[i.name] for i in self.instances if i.killed)

    def live(self) -> list[Instance]:
        return [i for i in self.instances if not i.killed]

    async def stop(self) -> dict[str, int | None]:
        """SIGTERM every live instance; each one's exit code (None: killed after
        :data:`STOP_SECONDS`)."""
        for instance in self.live():
            if instance.process.poll() is None:
                instance.process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for instance in self.live():
            try:
                codes[instance.name] = await asyncio.to_thread(instance.process.wait, STOP_SECONDS)
            except subprocess.TimeoutExpired:
                instance.process.kill()
                await asyncio.to_thread(instance.process.wait)
                codes[instance.name] = None
        return codes

    def kill_all(self) -> None:
        """Kill what still runs (the demo failed or was interrupted before :meth:`stop`)."""
        for instance in self.instances:
            if instance.process.poll() is None:
                instance.process.kill()
                instance.process.wait()


def serve_partitioned(
    database_url: str, broker: str, key_file: Path, port: int, log: Path
) -> subprocess.Popen[bytes]:
    """``croupier serve`` in the partitioned mode on ``database_url`` and ``broker``, signing
    with ``key_file``, its probes on ``port``, its output appended to ``log``."""
    env = {
        **os.environ,
        "CROUPIER_PARTITIONED": "1",
        "CROUPIER_DATABASE_URL": database_url,
        "CROUPIER_AMQP_URL": broker,
        "CROUPIER_HTTP_PORT": str(port),
        "CROUPIER_LEDGER_SIGNING_KEY": str(key_file.absolute()),
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "croupier.cli", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _settled(port: int, last: int) -> int:
    """The feed messages an instance consumed (its ``croupier_events_consumed_total``);
    ``last`` when it does not answer."""
    status, body = await _get(port, "/metrics")
    if status != 200:
        return last
    return int(sum(float(value) for value in _CONSUMED.findall(body)))


async def _get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of ``GET path`` on 127.0.0.1:``port``; (0, "") when nothing answers."""
    try:
        async with asyncio.timeout(5):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
                await writer.drain()
                response = (await reader.read()).decode(errors="replace")
            finally:
                writer.close()
    except (OSError, TimeoutError):
        return 0, ""
    head, _, body = response.partition("\r\n\r\n")
    try:
        return int(head.split(" ", 2)[1]), body
    except (IndexError, ValueError):
        return 0, ""
