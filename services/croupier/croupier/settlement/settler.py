"""The settler: feed messages in, ledger facts and wallet messages out, one batch at a time.

It orchestrates: the round repository (:mod:`~croupier.settlement.repository`) gives each
event its Round, the Round decides, the jackpot meters (:mod:`~croupier.settlement.meters`)
move, and the wallet results (:mod:`~croupier.settlement.results`) and dead letters go to the
outbox, all in one ledger append.

Replay and the live consumer both hand their messages here, so a recorded feed settles
through exactly the code the service runs. A batch is one ledger transaction: every round
it touches is appended under optimistic concurrency with its settlement results in the
outbox, or nothing is. After a failed append the settler forgets what that batch (and any
decided after it) touched and reads those rounds back from the ledger, so a retry decides
the same way; the other rounds in memory stay, as recorded.

Given a ``fence`` (an instance sharing the partitions, ``croupier.settlement.partitions``),
every append that writes to rounds is fenced by their tables' partitions: ``Fenced``, nothing
written, unless this instance holds them all; and only rounds of tables it ``owns`` are
timed out. Without, appends are not fenced (the single-instance service, replay).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, NamedTuple

from contract.canonical import Encoded, canonical_json
from contract.codes import RejectionCode
from contract.events import FeedEvent, read_event
from contract.feed import ContractError, EventType, too_large
from croupier.bus import KEPT_BYTES, Oversize, keep
from croupier.ledger import (
    Fence,
    Ledger,
    OutboxMessage,
    RecordedEvent,
    StreamAppend,
    VersionConflict,
)
from croupier.logs import context_ids
from croupier.settlement.deadletters import dead_letter
from croupier.settlement.facts import Delivery, Fact, event_fact
from croupier.settlement.meters import METER_PREFIX, Meters, moved_on
from croupier.settlement.repository import RoundRepository
from croupier.settlement.results import ResultBody, decided_result_chunks
from croupier.settlement.round import (
    HELD,
    REJECTED,
    SETTLED,
    VOIDED,
    MeterReader,
    Round,
    Status,
    stream_name,
)
from croupier.settlement.runtime import Turn
from holdem.values import quick

REJECTIONS_STREAM: Final = "rejections"
ROUND_PREFIX: Final = "round:"
#: Results encoded at a time, between which the event loop may take a turn: a round of
#: 100,000 players takes seconds to encode, longer than other tables may wait.
_RESULTS_EVERY: Final = 256
#: Wagers from which a round is heavy: its closing is decided on a worker thread (the event
#: loop runs other tables' batches meanwhile), and the live consumer settles it in a lane of
#: its own. Below, a closing is decided and encoded in a tenth of a second.
HEAVY_WAGERS: Final = 5_000
_CLOSING_EVENTS: Final = frozenset({EventType.ROUND_COMPLETED, EventType.ROUND_VOIDED})
#: Times a batch's jackpot movements are moved onto a meter another writer moved on first,
#: before the lost race is left to the caller (decided again).
REBASES: Final = 3


@quick
@dataclass(frozen=True, slots=True)
class Inbound:
    """One feed message: its raw body and the caller's reference (line or delivery tag).

    ``routing_key`` and ``message_id`` are the delivery's, kept on its dead letter. With
    ``oversize`` the message was over the contract's maximum and ``body`` is only its first
    ``KEPT_BYTES``: it is rejected ``too_large`` unread.
    """

    body: bytes
    ref: int
    routing_key: str = ""
    message_id: str | None = None
    oversize: Oversize | None = None


class Handled(NamedTuple):
    """What became of one message: ``accepted``, ``held``, ``duplicate`` or ``rejected``.

    A named tuple: one per message, built at a third of a frozen dataclass's cost.
    """

    ref: int
    verdict: str
    event_id: str | None = None
    table_id: str | None = None
    round_id: str | None = None
    event_type: str | None = None
    code: str | None = None
    reason: str | None = None
    #: The key of the fact keeping a refused message (the same bytes always have the same).
    kept: str | None = None
    #: False for a rejection the ledger held already (the same bytes again, or redelivered
    #: after a reconnect lost the ack): rejected all the same, but not a new one to count.
    new: bool = True


@dataclass
class BatchReport:
    """The outcome of one batch, after its ledger transaction committed."""

    handled: list[Handled] = field(default_factory=list)
    closed: list[RecordedEvent] = field(default_factory=list)
    #: Each closing fact recorded, with the wallet results it put in the outbox.
    written: list[tuple[RecordedEvent, list[OutboxMessage]]] = field(default_factory=list)
    #: What this batch's transaction wrote to the outbox, with the fact each message
    #: reports: the wallet results of closing facts and the dead letters of rejections
    #: new in the ledger (for the relay).
    outbox: list[tuple[RecordedEvent, list[OutboxMessage]]] = field(default_factory=list)
    #: The closing facts of rounds the batch read back from the ledger already closed.
    found_closed: list[RecordedEvent] = field(default_factory=list)

    @property
    def results(self) -> list[ResultBody]:
        """The wallet results recorded, each with its ``ledger_position`` (built when
        asked: the live service publishes the outbox rows instead)."""
        return [
            {**m.body, "ledger_position": fact.position}
            for fact, messages in self.written
            for m in messages
        ]


class Settler:
    """Decides feed messages into ledger facts, one transaction per batch."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        cache_rounds: int = 50_000,
        dead_letters: bool = False,
        fence: Callable[[Collection[str]], Fence] | None = None,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        """``dead_letters``: write a dead letter to the outbox with each rejection (live).
        ``fence``: the fence of an append writing for these tables (raising ``Fenced`` when
        they are not all held); ``owns``: whether a table is this instance's to time out."""
        self.ledger = ledger
        self.dead_letters = dead_letters
        self.fence = fence
        self.owns = owns
        self.repository = RoundRepository(ledger, cache_rounds)
        self._decided = 0
        self.meters = Meters(ledger)
        #: Rounds being decided on a worker thread: set once the thread is done with them.
        self._apart: dict[str, asyncio.Event] = {}

    @property
    def rounds(self) -> list[Round]:
        """The rounds in memory: open ones, the most recently touched (up to the cache size),
        and closed ones until the batch that closed them is committed."""
        return self.repository.rounds

    async def handle(self, batch: Sequence[Inbound]) -> BatchReport:
        """Decide and record a batch; returns once its facts are committed."""
        return await self.commit(await self.decide(batch))

    async def decide(self, batch: Sequence[Inbound]) -> Decided:
        """Decide a batch without recording it yet.

        The settler's memory moves on to the decided state at once, so the next batch can
        be decided while this one commits (pipelining). Commit decided batches in order;
        if a commit fails, everything decided after it must be dropped: the settler
        forgets what they touched, and a retry reads those rounds back from the ledger.
        """
        self._decided += 1
        work = Decided(number=self._decided)
        try:
            batch = [_bounded(message) for message in batch]
            parsed = [_parse(message) for message in batch]
            places = [e if not isinstance(e, ContractError) else e.place for e in parsed]
            work.report.found_closed += await self.repository.load(
                [p for p in places if p is not None], work.rounds, work.versions
            )
            turn = Turn()  # a commit in flight makes progress between turns
            levels = self._levels(work)
            for message, event in zip(batch, parsed, strict=True):
                if isinstance(event, ContractError):
                    work.report.handled += await self._refuse(message, event, work)
                    continue
                stream = stream_name(event.table_id, event.round_id)
                state = work.rounds[stream]
                unread = self.meters.unread(state, event)
                if unread:
                    await self.meters.read(unread)
                if self._apart:  # nothing awaited after it, before the round is touched
                    await self._round_free(stream)
                if event.event_type in _CLOSING_EVENTS and _heavy(state):
                    facts = await self._decide_apart(stream, state, event, levels)
                else:
                    facts = state.receive(event, levels)
                work.report.handled += self._handled(message, stream, state, event, facts, work)
                if turn.over():
                    await turn.give()
            await self._encode_results(work, turn)
        except BaseException:
            self._forget_failed(work)
            raise
        for stream, state in work.rounds.items():
            self.repository.remember(stream, state, work.versions[stream], work.number)
        self.meters.decided(work.meters, work.versions)
        return work

    async def commit(self, work: Decided) -> BatchReport:
        """Record a decided batch in one ledger transaction; its report once committed.

        Rounds the batch leaves settled or voided leave memory then: a late duplicate
        reads its round back from the ledger, so memory holds open rounds only.
        """
        try:
            await self._commit(work)
        except BaseException:
            self._forget_failed(work, later=True)
            raise
        for stream, state in work.rounds.items():
            self.repository.committed(stream, state, work.number)
        return work.report

    async def load_open(self, limit: int = 10_000) -> int:
        """Bring the ledger's open rounds (up to ``limit``, oldest first) into memory, those
        not there yet; the number read. Rounds memory holds as open that the ledger has
        closed since (another instance closed them) leave it.

        At start, and now and then while serving: rounds another process left open, or
        opened while this one stood by, are seen and time out.
        """
        return await self.repository.load_open(ROUND_PREFIX, limit)

    def closes_heavy(self, table_id: str, round_id: str) -> bool:
        """Whether closing this round is heavy (:data:`HEAVY_WAGERS`), as memory holds it."""
        state = self.repository.get(stream_name(table_id, round_id))
        return state is not None and _heavy(state)

    async def expire(
        self, held_timeout: float, round_timeout: float, busy: Collection[str] = ()
    ) -> BatchReport:
        """Reject events held longer than ``held_timeout`` s; void rounds open longer than
        ``round_timeout`` s (every wager refunded through the outbox, like a studio void).
        One ledger transaction; the voids are in the report's ``closed``. Rounds of the
        ``busy`` tables (a batch of theirs is being settled meanwhile) wait for a later
        sweep."""
        now = time.time()
        work = Decided()
        for stream, state, version in self.repository.entries():
            table = table_of(stream)
            elsewhere = self.owns is not None and not self.owns(table)
            if table in busy or stream in self._apart or elsewhere:
                continue  # in hand elsewhere, or another instance's partition: its owner's
            facts = _expired(state, now, held_timeout, round_timeout)
            if not facts:
                continue
            work.rounds[stream], work.versions[stream] = state, version
            for fact in facts:
                if fact.type == VOIDED:
                    work.add(stream, fact)
                    work.closings.append(fact)
                    continue
                if self.dead_letters:
                    fact = self._dead_letter_rejected(fact, None, work)
                work.add(stream, fact)
                work.report.handled.append(_handled_fact(fact))
        try:
            await self._encode_results(work, Turn())
            await self._commit(work)
        except BaseException:
            self._forget_failed(work)
            raise
        for stream, state in work.rounds.items():
            if state.status is not Status.OPEN or (state.table is None and not state.held):
                self.repository.drop(stream)  # closed, or never opened with nothing held
            else:
                self.repository.remember(stream, state, work.versions[stream], self._decided)
        return work.report

    async def reject_unopened(self) -> BatchReport:
        """At the end of a recorded feed: reject what waits for a round that never opened."""
        work = Decided()
        for stream, state, version in self.repository.entries():
            if state.table is not None or not state.held:
                continue
            work.rounds[stream] = state
            work.versions[stream] = version
            for fact in state.abandon():
                work.add(stream, fact)
                work.report.handled.append(_handled_fact(fact))
        await self._commit(work)
        return work.report

    async def quarantine(self, message: Inbound, error: BaseException) -> BatchReport:
        """Keep a message that settlement itself fails on, with the error, in the ledger
        (its failed attempt dropped what it touched from memory)."""
        message = _bounded(message)
        reason = f"settlement failed on this message: {error!r}"
        delivery = _delivery(message) if self.dead_letters else None
        fact = _raw_rejection(message, RejectionCode.POISON, reason, None, delivery)
        letters = [self._letter(fact.key, message, RejectionCode.POISON, reason)]
        letters = letters if self.dead_letters else []
        recorded, written = await self.ledger.append_with_new_keys(
            [StreamAppend(REJECTIONS_STREAM, None, [fact])], letters
        )
        ids = context_ids(message.body) if message.oversize is None else {}
        handled = Handled(
            message.ref,
            "rejected",
            ids.get("event_id"),
            ids.get("table_id"),
            ids.get("round_id"),
            code=RejectionCode.POISON,
            reason=reason,
            new=bool(written),
        )
        new = [r for r in recorded if r.key in written]
        return BatchReport(handled=[handled], outbox=_written(new, {}, letters))

    def _forget_failed(self, work: Decided, *, later: bool = False) -> None:
        """A batch failed (decided or committed): drop the rounds it touched, with ``later``
        those of every batch decided after it too (memory holds their decided, unrecorded
        state), and the meters. Every other round in memory is as the ledger recorded it,
        and stays: a lost race on a shared jackpot meter, or a database that went away,
        costs a read back of the batch's rounds, not of every open round. A round in memory
        that another writer moved on since meets a version conflict at its next append,
        and is dropped then."""
        self.repository.forget_touched(work.rounds, work.number if later else None)
        self.meters.forget()

    # -- deciding --------------------------------------------------------------------------

    async def _refuse(self, message: Inbound, error: ContractError, work: Decided) -> list[Handled]:
        """Record a message the contract refuses: at its place in its round when it has a
        free one there (the round goes on past it), else in the rejections stream."""
        delivery = _delivery(message) if self.dead_letters else None
        kept = _raw_rejection(message, error.code, str(error), error.event_id, delivery)
        place = error.place
        if place is None or kept.key in work.raw_rejections:
            return [self._keep_malformed(message, error, kept, work)]
        stream = stream_name(place.table_id, place.round_id)
        state = work.rounds[stream]
        unread = self.meters.unread_held(state)
        if unread:
            await self.meters.read(unread)
        await self._round_free(stream)
        facts = state.refuse(place.seq, kept, self._levels(work))
        if facts is None:
            return [self._keep_malformed(message, error, kept, work)]
        refused = Handled(
            message.ref,
            "rejected",
            error.event_id,
            place.table_id,
            place.round_id,
            code=error.code,
            reason=str(error),
            kept=kept.key,
            new=bool(facts),
        )
        if not facts:  # redelivered: recorded with its dead letter before
            return [refused]
        work.raw_rejections.add(kept.key)
        if self.dead_letters:
            letter = self._letter(kept.key, message, error.code, str(error))
            work.letters[letter.message_id] = letter
        work.add(stream, facts[0])
        _tick(state, time.time())
        return [refused, *self._add(stream, facts[1:], work, None)]

    def _keep_malformed(
        self, message: Inbound, error: ContractError, fact: Fact, work: Decided
    ) -> Handled:
        """Keep a message the contract refuses, ``fact``, in the rejections stream (once per
        batch)."""
        new = fact.key not in work.raw_rejections  # the same delivery twice: kept once
        if new:
            work.raw_rejections.add(fact.key)
            work.add(REJECTIONS_STREAM, fact, expected=None)
        if self.dead_letters:
            letter = self._letter(fact.key, message, error.code, str(error))
            work.letters[letter.message_id] = letter
        return Handled(
            message.ref,
            "rejected",
            error.event_id,
            code=error.code,
            reason=str(error),
            kept=fact.key,
            new=new,
        )

    def _letter(self, key: str, message: Inbound, code: str, reason: str) -> OutboxMessage:
        routing_key, message_id, cut = message.routing_key, message.message_id, message.oversize
        return dead_letter(key, message.body, routing_key, message_id, code, reason, cut)

    def _dead_letter_rejected(self, fact: Fact, message: Inbound | None, work: Decided) -> Fact:
        """The rejection of an event with the delivery its dead letter carries recorded in
        it (the feed contract's routing key and message id, from the event itself, so a
        redelivery decides the same fact); its dead letter, with the delivery's bytes or
        (for an event held before and released now) the event as recorded, goes in ``work``.
        """
        event = fact.data["event"]
        delivery: Delivery = {
            "routing_key": f"{event['table_id']}.{event['event_type']}",
            "message_id": event["event_id"],
        }
        body = message.body if message is not None else canonical_json(event).encode()
        code, reason = fact.data["code"], fact.data["reason"]
        letter = dead_letter(
            fact.key, body, delivery["routing_key"], delivery["message_id"], code, reason
        )
        work.letters[letter.message_id] = letter
        return Fact(fact.type, {**fact.data, "dead_letter": delivery}, fact.key)

    async def _decide_apart(
        self, stream: str, state: Round, event: FeedEvent, levels: MeterReader
    ) -> list[Fact]:
        """A heavy round's closing decided on a worker thread, the event loop free meanwhile;
        a batch decided beside it that touches the round waits for the thread first
        (:meth:`_round_free`, just before; nothing is awaited in between)."""
        assert stream not in self._apart, "one thread at a time on a round"
        done = self._apart[stream] = asyncio.Event()
        try:
            return await asyncio.to_thread(state.receive, event, levels)
        finally:
            del self._apart[stream]
            done.set()

    async def _round_free(self, stream: str) -> None:
        """Wait until no worker thread decides this round: a round is touched by one thread
        at a time, so the caller touches it next, awaiting nothing in between."""
        while stream in self._apart:
            await self._apart[stream].wait()

    def _levels(self, work: Decided) -> MeterReader:
        """The jackpot levels a round of ``work`` is decided on (as ``work`` moves them)."""
        return lambda table, currency: self.meters.level(table, currency, work.meters)

    def _handled(
        self,
        message: Inbound,
        stream: str,
        state: Round,
        event: FeedEvent,
        facts: list[Fact],
        work: Decided,
    ) -> list[Handled]:
        """What became of the message (its event decided into ``facts``), then of any held
        events it released."""
        if not facts:
            kind = str(event.event_type)
            ids = (event.event_id, event.table_id, event.round_id, kind)
            return [Handled(message.ref, "duplicate", *ids)]
        _tick(state, time.time())
        return self._add(stream, facts, work, message)

    def _add(
        self, stream: str, facts: list[Fact], work: Decided, message: Inbound | None
    ) -> list[Handled]:
        """Add a round's decided facts to the batch (a rejection with its dead letter, a
        closing with its meters and results); what became of each. ``message``: the
        delivery the first fact decides, None when all are held events released."""
        for index, fact in enumerate(facts):
            delivered = message if index == 0 else None
            if fact.type == REJECTED and self.dead_letters:
                fact = self._dead_letter_rejected(fact, delivered, work)
            work.add(stream, fact)
            if fact.type in (SETTLED, VOIDED):
                for key, moved in self.meters.movements(fact, work.meters, work.versions):
                    work.add(key, moved)
                work.closings.append(fact)
        ref = message.ref if message is not None else 0
        return [_handled_fact(fact, ref if i == 0 else 0) for i, fact in enumerate(facts)]

    async def _encode_results(self, work: Decided, turn: Turn) -> None:
        """Put the wallet results of the batch's closing facts in its outbox, in order,
        letting the event loop take turns between chunks (heartbeats, other tables'
        relaying, a commit in flight)."""
        for fact in work.closings:
            messages: list[OutboxMessage] = []
            for chunk in decided_result_chunks(fact.type, fact.data, fact.key, _RESULTS_EVERY):
                messages += chunk
                if turn.over():
                    await turn.give()
            work.outbox += messages
            work.results[fact.key] = messages
        work.closings.clear()

    # -- committing ------------------------------------------------------------------------

    async def _rebase(self, work: Decided) -> bool:
        """After another writer moved a jackpot meter this batch moves (an instance sharing
        the pool): move the batch's contributions onto each such meter's level as recorded
        now, in its closing facts too, so the batch commits without being decided again;
        the pool keeps one recorded order, each movement continuing from the last. False
        when a movement of a meter moved on awards or reseeds (decided again, then)."""
        rebased: dict[str, dict[str, tuple[int, int]]] = {}  # closing -> currency -> bounds
        for stream, moves in list(work.appends.items()):
            if not stream.startswith(METER_PREFIX):
                continue
            last = await self.ledger.read_last(stream)
            if last is None or last.version == work.expected[stream]:
                continue
            shifted = moved_on(moves, last.data["after"])
            if shifted is None:
                return False
            work.appends[stream], work.expected[stream] = shifted, last.version
            for move in shifted:
                bounds = rebased.setdefault(move.data["settlement"], {})
                bounds[move.data["currency"]] = (move.data["before"], move.data["after"])
        for stream, facts in work.appends.items():
            if stream.startswith(ROUND_PREFIX):
                work.appends[stream] = [_moved(f, rebased.get(f.key)) for f in facts]
        self.meters.forget()  # read again (one probe each) when next needed
        return True

    async def _commit(self, work: Decided) -> None:
        if not work.appends:
            return
        outbox = [*work.outbox, *work.letters.values()]
        fence = None
        if self.fence is not None:
            tables = {table_of(s) for s in work.appends if s.startswith(ROUND_PREFIX)}
            fence = self.fence(tables) if tables else None
        for attempt in range(REBASES + 1):
            try:
                recorded, written = await self.ledger.append_with_new_keys(
                    _stream_appends(work), outbox, fence=fence
                )
                break
            except VersionConflict as conflict:
                lost_on_meter = conflict.stream.startswith(METER_PREFIX)
                if attempt == REBASES or not lost_on_meter or not await self._rebase(work):
                    raise
        new = [r for r in recorded if r.key in written]
        # A refused message recorded before (redelivered after a reconnect lost its ack) is
        # not written again, and is not a new rejection to count.
        work.report.handled = [
            h._replace(new=False) if h.kept and h.kept not in written else h
            for h in work.report.handled
        ]
        closed = [r for r in recorded if r.type in (SETTLED, VOIDED)]
        work.report.closed = closed
        work.report.written = [(r, work.results[r.key]) for r in closed]
        work.report.outbox = _written(new, work.results, work.letters.values())


def _moved(fact: Fact, bounds: Mapping[str, tuple[int, int]] | None) -> Fact:
    """A closing fact with its jackpot movements' ``before`` and ``after`` as rebased."""
    if not bounds:
        return fact
    jackpot = [
        {**m, "before": bounds[m["currency"]][0], "after": bounds[m["currency"]][1]}
        if m["currency"] in bounds
        else m
        for m in fact.data["jackpot"]
    ]
    return Fact(fact.type, Encoded.plain({**fact.data, "jackpot": jackpot}), fact.key)


def _stream_appends(work: Decided) -> list[StreamAppend]:
    appends: list[StreamAppend] = []
    for stream, events in work.appends.items():
        expected = work.expected.get(stream)
        if expected is None:  # kept rejections: one recorded before is a no-op anywhere
            appends += [StreamAppend(stream, None, [event]) for event in events]
        else:
            appends.append(StreamAppend(stream, expected, events))
    return appends


def _written(
    new: Sequence[RecordedEvent],
    results: Mapping[str, list[OutboxMessage]],
    letters: Iterable[OutboxMessage],
) -> list[tuple[RecordedEvent, list[OutboxMessage]]]:
    """The outbox messages written with the facts ``new`` in the ledger: the wallet results
    of closing ones (``results`` by fact key), the dead letters of rejections."""
    by_key = {r.key: r for r in new}
    written = [(r, results[r.key]) for r in new if r.type in (SETTLED, VOIDED)]
    return written + [(by_key[m.event_key], [m]) for m in letters if m.event_key in by_key]


@dataclass
class Decided:
    """A decided batch: the facts, versions and outbox messages its commit will write."""

    number: int = 0  # in the order batches are decided
    report: BatchReport = field(default_factory=BatchReport)
    rounds: dict[str, Round] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    meters: dict[str, int] = field(default_factory=dict)
    appends: dict[str, list[Fact]] = field(default_factory=dict)
    expected: dict[str, int | None] = field(default_factory=dict)
    outbox: list[OutboxMessage] = field(default_factory=list)
    #: Closing facts whose wallet results are not in ``outbox`` yet.
    closings: list[Fact] = field(default_factory=list)
    #: Dead letters by outbox id (the same delivery twice in a batch: one letter).
    letters: dict[str, OutboxMessage] = field(default_factory=dict)
    #: The wallet results of each closing fact, by its key.
    results: dict[str, list[OutboxMessage]] = field(default_factory=dict)
    raw_rejections: set[str] = field(default_factory=set)

    def add(self, stream: str, fact: Fact, *, expected: int | None = -1) -> None:
        if stream not in self.appends:
            self.appends[stream] = []
            self.expected[stream] = self.versions.get(stream, 0) if expected == -1 else expected
        self.appends[stream].append(fact)
        if stream in self.versions:
            self.versions[stream] += 1


def _heavy(state: Round) -> bool:
    """Whether closing the round is heavy: open, with ``HEAVY_WAGERS`` wagers or more."""
    return state.status is Status.OPEN and len(state.bets) >= HEAVY_WAGERS


def table_of(stream: str) -> str:
    """The table of a round's stream (``round:<table_id>:<round_id>``)."""
    return stream.split(":", 2)[1]


def _bounded(message: Inbound) -> Inbound:
    """``message`` as kept: a body over the contract's maximum cut (a bus cuts it as it
    arrives; a recorded feed's line is cut here), so a rejection and its dead letter keep
    at most ``KEPT_BYTES`` of it."""
    if message.oversize is not None:
        return message
    body, oversize = keep(message.body)
    return message if oversize is None else replace(message, body=body, oversize=oversize)


def _parse(message: Inbound) -> FeedEvent | ContractError:
    if message.oversize is not None:
        return too_large(message.oversize.size)
    try:
        return read_event(message.body)
    except ContractError as error:
        return error


_VERDICTS: Final = {HELD: "held", REJECTED: "rejected"}


def _expired(state: Round, now: float, held_timeout: float, round_timeout: float) -> list[Fact]:
    """What ``state`` times out into at ``now``: its held events rejected once they waited
    ``held_timeout`` s, and the round voided once it has been open ``round_timeout`` s."""
    if state.status is not Status.OPEN:
        return []
    overdue = state.table is not None and now - (state.started_at or now) > round_timeout
    held_due = bool(state.held) and now - (state.held_since or now) > held_timeout
    waiting = state.waiting_for or ""
    facts: list[Fact] = []
    if state.held and (held_due or overdue):
        facts += state.expire_held(held_timeout if held_due else round_timeout)
    if overdue:
        facts.append(state.time_out(round_timeout, now, waiting))
    return facts


def _tick(state: Round, now: float) -> None:
    """After facts were decided for ``state`` at ``now``: keep its clocks."""
    if state.started_at is None:
        state.started_at = now
    if not state.held:
        state.held_since = None
    elif state.held_since is None:
        state.held_since = now


def _handled_fact(fact: Fact, ref: int = 0) -> Handled:
    verdict = _VERDICTS.get(fact.type, "accepted")
    event = event_fact(fact.data)["event"]
    return Handled(
        ref,
        verdict,
        event["event_id"],
        event["table_id"],
        event["round_id"],
        event["event_type"],
        fact.data.get("code"),
        fact.data.get("reason"),
    )


def _raw_rejection(
    message: Inbound, code: str, reason: str, event_id: str | None, delivery: Delivery | None
) -> Fact:
    """The fact keeping a refused message: its text, keyed by code and digest.

    Bytes that are not UTF-8 are kept as U+FFFD. A message over ``KEPT_BYTES`` is kept
    cut, with its ``size`` and ``sha256`` naming the original (an over-size delivery came
    cut already, with both). With the ``delivery`` its
    dead letter carries (live), the fact records it and is keyed by it too: the same bytes
    delivered twice are two rejections, each with its dead letter; redelivered, one.
    """
    body = message.body
    whole = message.oversize or Oversize(len(body), hashlib.sha256(body).hexdigest())
    digest = whole.sha256
    data: dict[str, Any] = {
        "raw": body[:KEPT_BYTES].decode("utf-8", errors="replace"),
        "event_id": event_id,
        "code": code,
        "reason": reason,
    }
    if whole.size > KEPT_BYTES:
        data |= {"size": whole.size, "sha256": digest}
    if delivery is None:
        return Fact(REJECTED, data, f"{code}:{digest}")
    where = f"{delivery['routing_key']}\x00{delivery['message_id'] or ''}".encode()
    place = hashlib.sha256(where).hexdigest()[:16]
    return Fact(REJECTED, data | {"dead_letter": delivery}, f"{code}:{place}:{digest}")


def _delivery(message: Inbound) -> Delivery:
    return {"routing_key": message.routing_key, "message_id": message.message_id}
