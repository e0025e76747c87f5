"""The outbox relay: settlement results from the ledger's outbox to the wallets' exchange.

A result is marked published only after the broker confirmed it; a crash in between means it
is published again with the same ``message_id``, which wallets deduplicate on. A result no
queue is bound for is an error that is logged, counted and retried, never dropped.
"""

from __future__ import annotations

import asyncio

import structlog

from croupier.bus import BusError, Outgoing, SettlementSink, Unroutable
from croupier.ledger import Ledger, PendingMessage
from croupier.metrics import Metrics

log = structlog.get_logger("croupier.relay")


class OutboxRelay:
    """Publishes pending outbox messages with confirms, then marks them published."""

    def __init__(
        self,
        ledger: Ledger,
        sink: SettlementSink,
        metrics: Metrics,
        *,
        batch: int = 1000,
        idle: float = 0.5,
    ) -> None:
        self.ledger = ledger
        self.sink = sink
        self.metrics = metrics
        self.batch = batch
        self.idle = idle
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()

    def wake(self) -> None:
        """New results were committed: publish them now rather than at the next poll."""
        self._wake.set()

    def stop(self) -> None:
        """Stop after the current round of publishing."""
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Relay until stopped, backing off on broker or database faults."""
        delay = 0.1
        while not self._stopping.is_set():
            try:
                sent = await self.relay_once()
                delay = 0.1
            except Exception as error:
                log.warning("relay fault; retrying", error=repr(error), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if sent < self.batch:
                await self._idle()

    async def relay_once(self) -> int:
        """Publish one page of pending results; the number confirmed and marked."""
        pending = await self.ledger.pending_outbox(self.batch)
        self.metrics.outbox_backlog.set(len(pending))
        if not pending:
            return 0
        confirmed = [m.message_id for m in pending]
        try:
            await self.sink.publish([_outgoing(m) for m in pending])
        except Unroutable as error:
            self.metrics.unroutable.inc(len(error.message_ids))
            log.error("settlement results are unroutable", message_ids=error.message_ids[:20])
            refused = set(error.message_ids)
            confirmed = [i for i in confirmed if i not in refused]
            await self.ledger.mark_published(confirmed)
            raise BusError(f"{len(refused)} results unroutable; bind a queue for them") from error
        await self.ledger.mark_published(confirmed)
        self.metrics.published.inc(len(confirmed))
        self.metrics.outbox_backlog.set(len(pending) - len(confirmed))
        return len(confirmed)

    async def drain(self, timeout: float = 10.0) -> None:
        """Publish everything pending now (at shutdown), giving up after ``timeout``."""
        async with asyncio.timeout(timeout):
            while await self.relay_once() == self.batch:
                pass

    async def _idle(self) -> None:
        try:
            async with asyncio.timeout(self.idle):
                await self._wake.wait()
        except TimeoutError:
            pass
        self._wake.clear()


def _outgoing(message: PendingMessage) -> Outgoing:
    body = {**message.body, "ledger_position": message.position}
    return Outgoing(message.message_id, message.routing_key, body)
