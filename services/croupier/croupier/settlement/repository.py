"""The round repository: rounds in memory by ledger stream, read back from the ledger when
not there.

Memory holds every open round it has seen, the most recently touched ones (up to the cache
size), and closed ones until the batch that closed them is committed; a round read back is
the round that was written (``Round.apply`` over its stream's facts), with when it started
and since when it holds events. A round is remembered with its stream version and the
number of the last decided batch that touched it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Final

from contract.events import FeedEvent
from contract.feed import Place
from croupier.ledger import Ledger, RecordedEvent
from croupier.settlement.facts import Fact
from croupier.settlement.round import HELD, SETTLED, VOIDED, Round, Status, stream_name

#: Facts folded between turns of the event loop when a round is read back.
READ_BACK_EVERY: Final = 1_000


class RoundRepository:
    """Rounds by stream, with their version and last deciding batch; an LRU cache."""

    def __init__(self, ledger: Ledger, cache_rounds: int) -> None:
        self.ledger = ledger
        self.cache_rounds = cache_rounds
        # stream -> (round, version, number of the last decided batch that touched it)
        self._rounds: OrderedDict[str, tuple[Round, int, int]] = OrderedDict()

    @property
    def rounds(self) -> list[Round]:
        """The rounds in memory."""
        return [state for state, _, _ in self._rounds.values()]

    def get(self, stream: str) -> Round | None:
        """The round of ``stream`` in memory, if it is there."""
        cached = self._rounds.get(stream)
        return None if cached is None else cached[0]

    def entries(self) -> list[tuple[str, Round, int]]:
        """(stream, round, version) of every round in memory, least recently touched first."""
        return [(stream, state, version) for stream, (state, version, _) in self._rounds.items()]

    async def load(
        self,
        events: Sequence[FeedEvent | Place],
        rounds: dict[str, Round],
        versions: dict[str, int],
    ) -> list[RecordedEvent]:
        """Put the round of every event (or refused message's place) into ``rounds``, with
        its version into ``versions``, from memory, else read back from the ledger; the
        closing facts of those read back."""
        missing: dict[str, Round] = {}
        for event in events:
            stream = stream_name(event.table_id, event.round_id)
            if stream in rounds or stream in missing:
                continue
            cached = self._rounds.get(stream)
            if cached is None:
                missing[stream] = Round(event.table_id, event.round_id)
            else:
                rounds[stream], versions[stream], _ = cached
        recorded = await self.ledger.read_streams(list(missing)) if missing else {}
        closed: list[RecordedEvent] = []
        for stream, state in missing.items():
            await read_back(state, recorded[stream])
            closed += [r for r in recorded[stream] if r.type in (SETTLED, VOIDED)]
            rounds[stream], versions[stream] = state, len(recorded[stream])
        return closed

    async def load_open(self, prefix: str, limit: int) -> int:
        """Bring the ledger's open rounds (up to ``limit``, oldest first) into memory, those
        not there yet; the number read. Rounds memory holds as open that the ledger has
        closed since (another instance closed them) leave it."""
        streams = await self.ledger.open_streams(prefix, (SETTLED, VOIDED), limit)
        if len(streams) < limit:
            still_open = set(streams)
            for stream, (state, _, _) in list(self._rounds.items()):
                if state.status is Status.OPEN and stream not in still_open:
                    del self._rounds[stream]
        missing = [stream for stream in streams if stream not in self._rounds]
        recorded = await self.ledger.read_streams(missing) if missing else {}
        for stream, records in recorded.items():
            _, table_id, round_id = stream.split(":", 2)
            state = Round(table_id, round_id)
            await read_back(state, records)
            self.remember(stream, state, len(records), 0)
        return len(recorded)

    def remember(self, stream: str, state: Round, version: int, number: int) -> None:
        """Keep ``state`` at ``version``, touched by batch ``number``; the least recently
        touched leave beyond the cache size."""
        self._rounds[stream] = (state, version, number)
        self._rounds.move_to_end(stream)
        while len(self._rounds) > self.cache_rounds:
            self._rounds.popitem(last=False)

    def committed(self, stream: str, state: Round, number: int) -> None:
        """Batch ``number`` committed: a round it closed leaves memory, unless a batch
        decided since (not committed yet) touched it again."""
        cached = self._rounds.get(stream)
        if state.status is not Status.OPEN and cached is not None and cached[2] == number:
            del self._rounds[stream]

    def drop(self, stream: str) -> None:
        """Let a round leave memory."""
        self._rounds.pop(stream, None)

    def forget_touched(self, streams: Iterable[str], since: int | None = None) -> None:
        """Drop these rounds, and with ``since`` every round a batch numbered ``since`` or
        later touched; they are read back from the ledger when needed."""
        for stream in streams:
            self._rounds.pop(stream, None)
        if since is not None:
            for stream, (_, _, number) in list(self._rounds.items()):
                if number >= since:
                    del self._rounds[stream]


async def read_back(state: Round, records: Sequence[RecordedEvent]) -> None:
    """Fold a round's recorded facts into ``state``, with when it started and holds since.

    The event loop runs between every ``READ_BACK_EVERY`` facts: a shared hand of 100,000
    players is 300,000 facts, seconds of folding, and its ``round.completed`` redelivered
    after a lost connection is read back whole; without turns the loop would miss the
    broker's heartbeat again and lose the connection again, round after round."""
    held_at: dict[str, float] = {}
    for index, record in enumerate(records):
        state.apply(Fact(record.type, record.data, record.key))
        if index % READ_BACK_EVERY == READ_BACK_EVERY - 1:
            await asyncio.sleep(0)
        if record.type == HELD:
            held_at[record.data["event"]["event_id"]] = record.recorded_at.timestamp()
    if records:
        state.started_at = records[0].recorded_at.timestamp()
    times = [held_at[e.event_id] for e in state.held.values() if e.event_id in held_at]
    state.held_since = min(times) if times else None
