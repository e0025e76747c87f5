"""A partition owner in a process of its own (``python paused_owner.py URL TABLE TERM POLL``),
for the test that pauses it with SIGSTOP: it keeps its leases (``PartitionOwner.run``) and
appends one event for TABLE every 50 ms, printing a JSON line for each attempt: ``ok`` with
the position written, or ``fenced`` with how many appends the metric has counted so far."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

from croupier.ledger import Fenced, StreamAppend
from croupier.ledger.postgres import PostgresLedger
from croupier.metrics import Metrics
from croupier.settlement.facts import Fact
from croupier.settlement.partitions import PartitionOwner


async def main(url: str, table: str, term: float, poll: float) -> None:
    ledger = PostgresLedger(url)
    owner = PartitionOwner(ledger, "paused", Metrics(), term=term, poll=poll)
    running = asyncio.create_task(owner.run(asyncio.Event()))
    while not owner.held:
        await asyncio.sleep(0.01)
    while not running.done():
        await asyncio.sleep(0.05)
        fact = Fact("t", {"by": "paused"}, uuid.uuid4().hex)
        stream = f"round:{table}:paused-{uuid.uuid4().hex[:8]}"
        try:
            (record,) = await owner.append([StreamAppend(stream, 0, [fact])], tables=[table])
            print(json.dumps({"ok": record.position}), flush=True)
        except Fenced:
            counted = sum(
                sample.value
                for metric in owner.metrics.registry.collect()
                if metric.name == "croupier_appends_fenced"
                for sample in metric.samples
                if sample.name.endswith("_total")
            )
            print(json.dumps({"fenced": counted}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])))
