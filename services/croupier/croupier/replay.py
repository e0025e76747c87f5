"""Replay: settle a recorded feed (JSONL) through the same settler the live service runs."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

import structlog

from croupier.contract import Rejection
from croupier.ledger import Ledger
from croupier.round import SETTLED, VOIDED, Status
from croupier.runtime import fewer_collections
from croupier.settler import (
    BatchReport,
    Handled,
    Inbound,
    ResultBody,
    Settler,
    settlement_results,
)

log = structlog.get_logger("croupier.replay")


@dataclass
class ReplaySummary:
    """What a replay did: rounds by status, rejections by reason, money per currency."""

    settled: int = 0
    voided: int = 0
    open: dict[str, str] = field(default_factory=dict)
    rejected: Counter[str] = field(default_factory=Counter)
    events: int = 0
    duplicates: int = 0
    wagered: Counter[str] = field(default_factory=Counter)
    returned: Counter[str] = field(default_factory=Counter)
    closed_streams: set[str] = field(default_factory=set)
    read_back: int = 0

    def render(self) -> str:
        """The summary as a few lines of text."""
        lines = [
            f"events read      {self.events:>12,}  (duplicates ignored: {self.duplicates:,})",
            f"rounds settled   {self.settled:>12,}",
            f"rounds voided    {self.voided:>12,}",
            f"  of which closed by an earlier run (results read back): {self.read_back:,}",
            f"rounds open      {len(self.open):>12,}",
        ]
        lines += [f"  open {name}: {why}" for name, why in sorted(self.open.items())[:20]]
        lines.append(f"events rejected  {sum(self.rejected.values()):>12,}")
        lines += [f"  {code:<24}{n:>10,}" for code, n in self.rejected.most_common()]
        for currency in sorted(self.wagered):
            wagered, returned = self.wagered[currency], self.returned[currency]
            lines.append(
                f"{currency}  wagered {wagered:>16,}  returned {returned:>16,}  "
                f"hold {wagered - returned:>14,}"
            )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The summary for programs (``croupier replay --json``)."""
        return {
            "events": self.events,
            "duplicates": self.duplicates,
            "rounds": {
                "settled": self.settled,
                "voided": self.voided,
                "read_back": self.read_back,
                "open": dict(sorted(self.open.items())),
            },
            "rejected": dict(self.rejected.most_common()),
            "currencies": {
                currency: {
                    "wagered": self.wagered[currency],
                    "returned": self.returned[currency],
                    "hold": self.wagered[currency] - self.returned[currency],
                }
                for currency in sorted(self.wagered)
            },
        }


async def replay(
    lines: Iterable[bytes],
    ledger: Ledger,
    results: TextIO,
    rejections: TextIO,
    *,
    batch_size: int = 2000,
) -> ReplaySummary:
    """Settle every line; write results and rejections; return the summary."""
    with fewer_collections():  # every round of the feed stays in memory
        return await _replay(lines, ledger, results, rejections, batch_size)


async def _replay(
    lines: Iterable[bytes],
    ledger: Ledger,
    results: TextIO,
    rejections: TextIO,
    batch_size: int,
) -> ReplaySummary:
    settler = Settler(ledger, cache_rounds=10**9)
    summary = ReplaySummary()
    held_lines: dict[str, int] = {}
    batch: list[Inbound] = []
    committing: asyncio.Task[BatchReport] | None = None

    async def flush() -> None:
        # Decide this batch while the previous one commits; commits stay in order.
        nonlocal committing
        decided = await settler.decide(batch)
        batch.clear()
        if committing is not None:
            _record(await committing, summary, results, rejections, held_lines)
        committing = asyncio.create_task(settler.commit(decided))

    try:
        for number, line in enumerate(lines, start=1):
            summary.events += 1
            batch.append(Inbound(line.rstrip(b"\r\n"), number))
            if len(batch) >= batch_size:
                await flush()
        if batch:
            await flush()
        if committing is not None:
            _record(await committing, summary, results, rejections, held_lines)
            committing = None
    finally:
        if committing is not None:  # a failure elsewhere: let the commit in flight end
            await asyncio.gather(committing, return_exceptions=True)
    _record(await settler.reject_unopened(), summary, results, rejections, held_lines)
    _record(await _settled_before(settler, summary), summary, results, rejections, held_lines)
    summary.open = {
        state.stream: state.waiting_for or ""
        for state in settler.rounds
        if state.status is Status.OPEN
    }
    return summary


async def _settled_before(settler: Settler, summary: ReplaySummary) -> BatchReport:
    """Rounds of this feed the ledger had already closed: their results, read back.

    Replaying a feed twice writes the same results, not an empty file.
    """
    streams = [
        state.stream
        for state in settler.rounds
        if state.status is not Status.OPEN and state.stream not in summary.closed_streams
    ]
    recorded = await settler.ledger.read_streams(streams) if streams else {}
    closed = [
        next(r for r in reversed(records) if r.type in (SETTLED, VOIDED))
        for records in recorded.values()
    ]
    summary.read_back = len(closed)
    results = [result for r in closed for result in settlement_results(r.data, r.position)]
    return BatchReport(closed=closed, results=results)


def _record(
    report: BatchReport,
    summary: ReplaySummary,
    results: TextIO,
    rejections: TextIO,
    held_lines: dict[str, int],
) -> None:
    for handled in report.handled:
        _count(handled, summary, rejections, held_lines)
    for closed in report.closed:
        summary.closed_streams.add(closed.stream)
        summary.settled += closed.type == SETTLED
        summary.voided += closed.type == VOIDED
    for result in report.results:
        summary.wagered[result["currency"]] += result["stake_total"]
        summary.returned[result["currency"]] += result["returned_total"]
        results.write(_result_line(result))


# Compact UTF-8 JSON in the body's (the contract's) field order: the text
# ``SettlementResult.model_dump_json`` gives, without building the model.
_result_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _result_line(body: ResultBody) -> str:
    return _result_json(body) + "\n"


def _count(
    handled: Handled, summary: ReplaySummary, rejections: TextIO, held_lines: dict[str, int]
) -> None:
    if handled.verdict == "duplicate":
        summary.duplicates += 1
    elif handled.verdict == "held" and handled.event_id:
        held_lines[handled.event_id] = handled.ref
    elif handled.verdict == "rejected":
        line = handled.ref or held_lines.get(handled.event_id or "", 0)
        summary.rejected[handled.code or "unknown"] += 1
        rejection = Rejection(
            line=max(line, 1), event_id=handled.event_id, reason=handled.reason or ""
        )
        rejections.write(json.dumps(rejection.model_dump(mode="json")) + "\n")
        log.info(
            "event rejected",
            line=line,
            event_id=handled.event_id,
            table_id=handled.table_id,
            round_id=handled.round_id,
            code=handled.code,
        )
