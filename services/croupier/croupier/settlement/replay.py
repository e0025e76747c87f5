"""Replay: settle a recorded feed (JSONL) through the same settler the live service runs.

Memory is bounded whatever the feed's size: lines are read as they are settled, one batch
decided while the previous one commits; settled and voided rounds leave memory once
committed; at most :data:`OPEN_ROUNDS` open rounds stay in memory (older ones are read back
from the ledger when their next event comes; the end-of-feed summary lists the ones in
memory). Only rounds an earlier run closed are remembered, by name, so that their results
are read back once.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

import msgspec
import structlog

from contract.codes import RejectionCode
from contract.settlement import RejectedLine
from croupier.ledger import Ledger
from croupier.settlement.results import ResultBody, settlement_results
from croupier.settlement.round import SETTLED, VOIDED, Status
from croupier.settlement.runtime import fewer_collections
from croupier.settlement.settler import BatchReport, Handled, Inbound, Settler

log = structlog.get_logger("croupier.settlement.replay")
#: Open rounds kept in memory during a replay (the live service's default too).
OPEN_ROUNDS: Final = 50_000


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
    with fewer_collections():  # many rounds in memory: open ones, and a batch's
        return await _replay(lines, ledger, results, rejections, batch_size)


async def _replay(
    lines: Iterable[bytes],
    ledger: Ledger,
    results: TextIO,
    rejections: TextIO,
    batch_size: int,
) -> ReplaySummary:
    settler = Settler(ledger, cache_rounds=OPEN_ROUNDS)
    summary = ReplaySummary()
    out = _Output(results, rejections, summary, await ledger.last_position())
    batch: list[Inbound] = []
    committing: asyncio.Task[BatchReport] | None = None

    async def flush() -> None:
        # Decide this batch while the previous one commits; commits stay in order.
        nonlocal committing
        decided = await settler.decide(batch)
        batch.clear()
        if committing is not None:
            out.record(await committing)
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
            out.record(await committing)
            committing = None
    finally:
        if committing is not None:  # a failure elsewhere: let the commit in flight end
            await asyncio.gather(committing, return_exceptions=True)
    out.record(await settler.reject_unopened())
    summary.open = {
        state.stream: state.waiting_for or ""
        for state in settler.rounds
        if state.status is Status.OPEN
    }
    return summary


@dataclass
class _Output:
    """Writes what committed batches report: results, rejections and the summary."""

    results: TextIO
    rejections: TextIO
    summary: ReplaySummary
    #: The ledger's last position before the replay: closures up to it are an earlier run's.
    earlier: int
    held_lines: dict[str, int] = field(default_factory=dict)
    read_back: set[str] = field(default_factory=set)

    def record(self, report: BatchReport) -> None:
        for handled in report.handled:
            _count(handled, self.summary, self.rejections, self.held_lines)
        closed = list(report.closed)
        results = list(report.results)
        # Rounds an earlier run closed: their results once, read back (replaying a feed
        # twice writes the same results, not an empty file).
        for record in report.found_closed:
            if record.position <= self.earlier and record.stream not in self.read_back:
                self.read_back.add(record.stream)
                self.summary.read_back += 1
                closed.append(record)
                results += settlement_results(record.data, record.position)
        for record in closed:
            self.summary.settled += record.type == SETTLED
            self.summary.voided += record.type == VOIDED
        for result in results:
            self.summary.wagered[result["currency"]] += result["stake_total"]
            self.summary.returned[result["currency"]] += result["returned_total"]
            self.results.write(_result_line(result))


# Compact UTF-8 JSON in the body's (the contract's) field order: the text
# ``SettlementResult.model_dump_json`` gives, without building the model. msgspec writes
# the json module's text for a result (integers and text) several times faster.
_result_json = msgspec.json.Encoder().encode
_result_json_slow = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _result_line(body: ResultBody) -> str:
    try:
        return _result_json(body).decode() + "\n"
    except UnicodeEncodeError:  # a lone surrogate: the json module writes it
        return _result_json_slow(body) + "\n"


def _count(
    handled: Handled, summary: ReplaySummary, rejections: TextIO, held_lines: dict[str, int]
) -> None:
    if handled.verdict == "duplicate":
        summary.duplicates += 1
    elif handled.verdict == "held" and handled.event_id:
        held_lines[handled.event_id] = handled.ref
    elif handled.verdict == "accepted" and not handled.ref and handled.event_id:
        held_lines.pop(handled.event_id, None)  # released
    elif handled.verdict == "rejected":
        line = handled.ref or held_lines.pop(handled.event_id or "", 0)
        summary.rejected[handled.code or "unknown"] += 1
        rejection = RejectedLine(
            line=max(line, 1),
            event_id=handled.event_id,
            reason=handled.reason or "",
            code=RejectionCode(handled.code) if handled.code else None,
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
