"""The rounds read model: rounds by table and id, and each player's rounds, newest first.

Tables (money in integer minor units; ``closed_at`` is the completing event's game time):

``history_rounds``
    One row per closed round (settled or voided): game, pay table, status, and the ledger
    ``position`` of its settlement. Keyed by (table_id, round_id); listed per table by
    position.
``history_player_rounds``
    One row per player, currency and closed round: stake, returned, the player's wagers
    with their results and why they paid (JSON text), and ``document``: the row exactly
    as the API answers it (a ``PlayerRound`` in JSON, with the decisions and the cards the
    player may see). Keyed by (player_id, position, currency), the order a player's history
    is read in, newest first.
``history_recalls``
    One row per closed round and player in it: ``document``, the round recall cut to what
    that player may see (:func:`croupier.history.recall.for_viewer`), in JSON. A player's
    recall is one lookup on (table_id, round_id, player_id); a round the player was not in
    and a round that does not exist are the same missing row.
``history_decisions``
    Every accepted decision, by round and ante.

Each row comes from exactly one ledger fact and is only inserted; positions never change,
so a page cursor (the last row's position) stays valid while rounds arrive. The documents
are folded when the round closes from its stream up to the closing fact (earlier batches'
facts are read in :meth:`RoundsProjection.gather`), on plain data by
:mod:`croupier.history.documents`, which gives the models' JSON byte for byte; later facts
of a closed round are held or rejected events, which players never see. Staff recall folds
the round's whole stream at each request (:mod:`croupier.history.recall`), so it shows
those too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from croupier.history.documents import player_documents
from croupier.history.recall import paytable_of
from croupier.ledger import Ledger, RecordedEvent
from croupier.projection import Changes, Column, Projection, Table
from croupier.settlement.round import ACCEPTED, SETTLED, VOIDED


def _text(name: str, nullable: bool = False) -> Column:
    return Column(name, "text", nullable)


def _int(name: str, nullable: bool = False) -> Column:
    return Column(name, "int", nullable)


ROUNDS: Final = Table(
    "history_rounds",
    (
        _text("table_id"),
        _text("round_id"),
        _text("game"),
        _text("paytable"),
        _text("status"),
        _text("closed_at", nullable=True),
        _int("position"),
    ),
    key=("table_id", "round_id"),
    indexes=(("table_id", "position"),),
)
PLAYER_ROUNDS: Final = Table(
    "history_player_rounds",
    (
        _text("player_id"),
        _int("position"),
        _text("currency"),
        _text("table_id"),
        _text("round_id"),
        _text("game"),
        _text("paytable"),
        _text("status"),
        _text("closed_at", nullable=True),
        _int("stake"),
        _int("returned"),
        _text("wagers"),
        _text("document"),
    ),
    key=("player_id", "position", "currency"),
)
RECALLS: Final = Table(
    "history_recalls",
    (_text("table_id"), _text("round_id"), _text("player_id"), _text("document")),
    key=("table_id", "round_id", "player_id"),
    # A recall of a shared hand is about 7.7 kB of JSON and 2.2 kB after lz4: kept in its row.
    inline_bytes=4080,
)
DECISIONS: Final = Table(
    "history_decisions",
    (
        _text("table_id"),
        _text("round_id"),
        _text("ante_bet_id"),
        _text("stage"),
        _text("action"),
        _text("bet_id", nullable=True),
        _int("amount", nullable=True),
        _int("position"),
    ),
    key=("table_id", "round_id", "ante_bet_id", "stage"),
)


#: Facts of open rounds kept between batches at most (beyond, they are read again at the close).
OPEN_FACTS_KEPT: Final = 200_000


class RoundsProjection(Projection):
    """Projects closed rounds per table and per player, their recalls, and decisions."""

    name = "rounds"
    version = 4
    tables = (ROUNDS, PLAYER_ROUNDS, RECALLS, DECISIONS)

    def __init__(self) -> None:
        self._earlier: dict[str, list[RecordedEvent]] = {}
        # The facts of rounds still open at the end of the last batch, each from its first
        # fact on, and the position the next batch must start at for them to still hold.
        self._open: dict[str, list[RecordedEvent]] = {}
        self._next = 0

    async def gather(self, events: Sequence[RecordedEvent], ledger: Ledger) -> None:
        """The earlier facts of each round that closes in ``events``: those the last batch
        left open when this batch follows on from it, the rest read from the ledger."""
        first = events[0].position if events else 0
        kept = self._open if first == self._next else {}
        self._open = {}
        closing = {e.stream for e in events if e.stream.startswith("round:") and _closes(e)}
        whole = {e.stream for e in events if e.version == 1}  # nothing earlier to read
        missing = sorted(closing - whole - kept.keys())
        streams = await ledger.read_streams(missing) if missing else {}
        read = {s: [f for f in facts if f.position < first] for s, facts in streams.items()}
        self._earlier = {**kept, **read}

    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        facts, self._earlier = self._earlier, {}
        for event in events:
            if not event.stream.startswith("round:"):
                continue
            facts.setdefault(event.stream, []).append(event)
            if event.type == ACCEPTED and event.data["event"]["event_type"] == "decision.made":
                changes.insert(DECISIONS.name, _decision(event))
            elif _closes(event):
                _closed(event, facts.pop(event.stream), changes)
        if events:
            # Rounds seen from their first fact on; the others are read when they close.
            self._open = {s: f for s, f in facts.items() if f[0].version == 1}
            if sum(map(len, self._open.values())) > OPEN_FACTS_KEPT:
                self._open = {}
            self._next = events[-1].position + 1


def projection() -> Projection:
    """The rounds projection (registry entry point)."""
    return RoundsProjection()


def _decision(event: RecordedEvent) -> dict[str, Any]:
    feed = event.data["event"]
    move = feed["payload"]
    return {
        "table_id": feed["table_id"],
        "round_id": feed["round_id"],
        "ante_bet_id": move["ante_bet_id"],
        "stage": move["stage"],
        "action": move["action"],
        "bet_id": move.get("bet_id"),
        "amount": move.get("amount"),
        "position": event.position,
    }


def _closes(event: RecordedEvent) -> bool:
    return event.type in (SETTLED, VOIDED)


def _closed(event: RecordedEvent, facts: list[RecordedEvent], changes: Changes) -> None:
    data = event.data
    feed = data["event"]
    table = paytable_of(data["paytable"]["id"], data["paytable"]["version"])
    status = "settled" if event.type == SETTLED else "voided"
    common = {
        "table_id": feed["table_id"],
        "round_id": feed["round_id"],
        "game": str(table.game) if table else "",
        "paytable": data["paytable"]["id"],
        "status": status,
        "closed_at": feed.get("occurred_at"),
        "position": event.position,
    }
    assert event.stream == f"round:{common['table_id']}:{common['round_id']}", event.stream
    changes.insert(ROUNDS.name, common)
    found = player_documents(
        common["table_id"],
        common["round_id"],
        facts,
        game=common["game"],
        paytable_id=common["paytable"],
        status=status,
        closed_at=common["closed_at"],
    )
    key = {"table_id": common["table_id"], "round_id": common["round_id"]}
    for player_id, document in found.recalls:
        changes.insert(RECALLS.name, {**key, "player_id": player_id, "document": document})
    for row in found.rows:
        changes.insert(
            PLAYER_ROUNDS.name,
            {
                **common,
                "player_id": row.player_id,
                "currency": row.currency,
                "stake": row.stake,
                "returned": row.returned,
                "wagers": row.wagers,
                "document": row.document,
            },
        )
