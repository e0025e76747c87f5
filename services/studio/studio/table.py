"""One studio table playing its rounds: bets, the deal, decisions, in the order of a live game.

A round is first drafted as :class:`Step` s (event type, payload, time); faults may then edit
the draft (see :mod:`studio.faults`), and :meth:`StudioTable.stamp` turns it into feed
events with their ``seq``, ``event_id`` and ``occurred_at``.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from contract.feed import SCHEMA_VERSION, EventType, Target
from holdem import Action, Game, PayTable, Spot, load_paytable
from holdem.cards import card_text
from holdem.schedule import DecisionStage, schedule
from studio.config import StudioConfig, TableSpec
from studio.gamefaults import draw
from studio.message import FeedMessage
from studio.strategy import Board, DecisionPoint, Hole, Strategy, make_strategy

MAIN_BOX = "main"
#: Chip values a player stakes, in minor units, and how often (smaller chips are commoner).
CHIPS = (100, 200, 500, 1_000, 2_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 1_000_000)
CHIP_WEIGHTS = (30, 18, 14, 10, 6, 6, 5, 4, 3, 2, 1.5, 0.5)
#: How long each part of a round takes at the table, in milliseconds.
BETTING_MS = 12_000
DECISION_MS = 10_000
CARD_MS = 400
STREET_MS = 1_500
#: The board cards each street deals: the flop, the turn and the river.
STREETS = (3, 1, 1)
SHOWDOWN_MS = 2_000
BREAK_MS = (3_000, 6_000)
_CARD_TEXT = tuple(card_text(card) for card in range(52))
_OCCUPANCY = 0.9


@dataclass(slots=True)
class Step:
    """One event of a round being drafted. ``fault`` names the fault this event carries."""

    event_type: EventType
    payload: dict[str, Any]
    at_ms: int
    fault: str | None = None


@dataclass(slots=True)
class Seat:
    """One ante in the round: whose it is, on which box, and whether it is still in play."""

    bet_id: str
    player_id: str
    box: str
    ante: int
    in_play: bool = True
    flop_bet: bool = False


@dataclass(slots=True)
class Draft:
    """A round being drafted: its id, its steps and the next free bet number."""

    round_id: str
    steps: list[Step] = field(default_factory=list)
    next_bet: int = 1

    def new_bet_id(self) -> str:
        """A bet id not yet used in the round."""
        bet_id = f"b{self.next_bet}"
        self.next_bet += 1
        return bet_id


class _Chips:
    """Stakes within one spot's limits, drawn with the chip weights."""

    def __init__(self, low: int, high: int) -> None:
        pairs = [(c, w) for c, w in zip(CHIPS, CHIP_WEIGHTS, strict=True) if low <= c <= high]
        self.values = [c for c, _ in pairs] or [low]
        self.cumulative = list(accumulate(w for _, w in pairs)) or [1.0]

    def draw(self, rng: random.Random) -> int:
        return rng.choices(self.values, cum_weights=self.cumulative)[0]


class Clock:
    """RFC 3339 UTC text for millisecond offsets from a start time."""

    def __init__(self, start_epoch_s: int) -> None:
        self._start = start_epoch_s
        self._second = -1
        self._prefix = ""

    def text(self, at_ms: int) -> str:
        """The timestamp ``at_ms`` after the start, e.g. ``2024-05-01T20:00:01.250Z``."""
        second, milli = divmod(at_ms, 1000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self._start + second))
        return f"{self._prefix}.{milli:03d}Z"


class StudioTable:
    """A table that plays rounds of its game and pay table, one after another."""

    def __init__(self, spec: TableSpec, config: StudioConfig, rng: random.Random, offset_ms: int):
        self.spec = spec
        self.paytable: PayTable = load_paytable(spec.paytable)
        self.game = self.paytable.game
        self.rng = rng
        self.strategy: Strategy = make_strategy(config.strategy, rng, config.timeout_rate)
        self.side_bet_rate = config.side_bet_rate
        self.game_faults = config.game_faults
        self.clock = Clock(int(config.start.timestamp()))
        self.now_ms = offset_ms
        self.session = f"{rng.getrandbits(32):08x}"
        # Event ids are drawn from the seeded stream and mixed with the table id: the same
        # config repeats its feed exactly, and tables of another name (another demo run, the
        # same seed) never repeat an event id, which the ledger would take as the same event.
        self._id_mask = int.from_bytes(hashlib.sha256(spec.table_id.encode()).digest()[:16])
        self.rounds_played = 0
        self._chips = {
            spot: _Chips(limit.min, limit.max) for spot, limit in self.paytable.limits.items()
        }
        self._side_spot = Spot.AA_BONUS if self.game is Game.CASINO_HOLDEM else Spot.PLUS
        self._players = [f"{spec.table_id}-p{n}" for n in range(1, spec.players + 1)]

    # ------------------------------------------------------------ one round

    def draft_round(self) -> Draft:
        """Play one round and return its draft (no faults)."""
        self.rounds_played += 1
        draft = Draft(f"{self.spec.table_id}:{self.session}:{self.rounds_played:06d}")
        opened = {"game": self.game.value, "paytable": self.paytable.id}
        self._add(draft, EventType.ROUND_OPENED, opened)
        seats = self._place_bets(draft)
        self._deal_and_decide(draft, seats)
        self._add(draft, EventType.ROUND_COMPLETED, {}, SHOWDOWN_MS)
        self.now_ms += self.rng.randint(*BREAK_MS)
        return draft

    def _add(self, draft: Draft, kind: EventType, payload: dict[str, Any], wait: int = 0) -> None:
        self.now_ms += wait
        draft.steps.append(Step(kind, payload, self.now_ms))

    def _place_bets(self, draft: Draft) -> list[Seat]:
        seating = self._seating()
        gap = max(1, BETTING_MS // (2 * len(seating)))
        antes, seats = self._chips[Spot.ANTE], []
        for box, player in seating:
            seat = Seat(draft.new_bet_id(), player, box, antes.draw(self.rng))
            seats.append(seat)
            self._add(draft, EventType.BET_PLACED, self._bet(seat, seat.bet_id, Spot.ANTE), gap)
            for spot in self._side_bets():
                payload = self._bet(seat, draft.new_bet_id(), spot)
                self._add(draft, EventType.BET_PLACED, payload, gap)
        return seats

    def _seating(self) -> list[tuple[str, str]]:
        """(box, player) of every ante this round."""
        if self.spec.boxes is None:
            return [(MAIN_BOX, player) for player in self._players]
        rng = self.rng
        boxes = [str(b) for b in range(1, self.spec.boxes + 1) if rng.random() < _OCCUPANCY]
        boxes = boxes or [str(rng.randint(1, self.spec.boxes))]
        if len(self._players) >= len(boxes):
            players = rng.sample(self._players, len(boxes))
        else:
            players = [rng.choice(self._players) for _ in boxes]
        return list(zip(boxes, players, strict=True))

    def _side_bets(self) -> list[Spot]:
        rng, rate, spots = self.rng, self.side_bet_rate, []
        if rate and rng.random() < rate:
            spots.append(self._side_spot)
        if self.paytable.jackpot is not None and rate and rng.random() < rate:
            spots.append(Spot.JACKPOT)
        return spots

    def _bet(self, seat: Seat, bet_id: str, spot: Spot) -> dict[str, Any]:
        if spot is Spot.ANTE:
            amount = seat.ante
        elif spot is Spot.JACKPOT and self.paytable.jackpot is not None:
            amount = self.paytable.jackpot.stake
        else:
            amount = self._chips[spot].draw(self.rng)
        return {
            "bet_id": bet_id,
            "player_id": seat.player_id,
            "box": seat.box,
            "spot": spot.value,
            "amount": amount,
            "currency": self.spec.currency,
        }

    def _deal_and_decide(self, draft: Draft, seats: list[Seat]) -> None:
        boxes = list(dict.fromkeys(seat.box for seat in seats))
        deck = draw(2 * len(boxes) + 11, len(boxes), self.game_faults, self.rng)
        deal = iter(deck)
        self._deal(draft, Target.BURN, [next(deal)], None, STREET_MS)
        holes: dict[str, Hole] = {}
        for box in boxes:
            holes[box] = (next(deal), next(deal))
            self._deal(draft, Target.PLAYER, list(holes[box]), box)
        self._deal(draft, Target.DEALER, [next(deal), next(deal)])
        asks = {stage.board_before: stage for stage in schedule(self.game)}
        board: list[int] = []
        for street in STREETS:
            stage = asks.get(len(board))
            if stage is not None:
                self._decide(draft, seats, holes, tuple(board), stage)
            self._deal(draft, Target.BURN, [next(deal)], None, STREET_MS)
            street_cards = [next(deal) for _ in range(street)]
            board.extend(street_cards)
            self._deal(draft, Target.BOARD, street_cards)

    def _deal(
        self, draft: Draft, target: Target, cards: list[int], box: str | None = None, wait: int = 0
    ) -> None:
        payload: dict[str, Any] = {"target": target.value}
        if box is not None:
            payload["box"] = box
        payload["cards"] = [_CARD_TEXT[card] for card in cards]
        self._add(draft, EventType.CARDS_DEALT, payload, wait or CARD_MS)

    def _decide(
        self,
        draft: Draft,
        seats: list[Seat],
        holes: dict[str, Hole],
        board: Board,
        asked: DecisionStage,
    ) -> None:
        """Ask every ante still in play for its decision at ``asked`` (holdem.schedule)."""
        live = [seat for seat in seats if seat.in_play]
        gap = max(1, DECISION_MS // (len(live) + 1))
        stage = asked.stage
        for seat in live:
            point = DecisionPoint(
                self.game, stage, holes[seat.box], board, self.paytable, seat.flop_bet
            )
            action = self.strategy.decide(point)
            if action is None:  # timed out: the stage's timeout action, sent as no decision
                seat.in_play = asked.on_timeout is not Action.FOLD
                continue
            if action not in asked.actions:
                raise ValueError(f"strategy answered {action!r} at {self.game} {stage}")
            payload: dict[str, Any] = {
                "ante_bet_id": seat.bet_id,
                "stage": stage.value,
                "action": action.value,
            }
            if action is asked.wager_action:
                payload["bet_id"] = draft.new_bet_id()
                payload["amount"] = seat.ante * asked.multiple
                seat.flop_bet |= asked.wager is Spot.FLOP_BET
            seat.in_play = action is not Action.FOLD
            self._add(draft, EventType.DECISION_MADE, payload, gap)
        self.now_ms += gap

    # ------------------------------------------------------------ feed events

    def stamp(self, draft: Draft) -> list[FeedMessage]:
        """The draft's feed messages, numbered ``seq`` 1, 2, 3 ... with fresh event ids.

        The JSON body is written from a per-round template (the envelope's strings are ids
        and names that need no escaping) around the encoded payload: the feed's hot path.
        """
        getrandbits, clock, dumps = self.rng.getrandbits, self.clock, _COMPACT.encode
        mask = self._id_mask
        table_id, round_id = self.spec.table_id, draft.round_id
        middle = (
            f'","schema_version":{SCHEMA_VERSION},"table_id":"{table_id}",'
            f'"round_id":"{round_id}","seq":'
        )
        messages = []
        for seq, step in enumerate(draft.steps, start=1):
            event_id = uuid4_text(getrandbits(128) ^ mask)
            kind = _TYPE_TEXT[step.event_type]
            occurred_at = clock.text(step.at_ms)
            event = {
                "event_id": event_id,
                "event_type": kind,
                "schema_version": SCHEMA_VERSION,
                "table_id": table_id,
                "round_id": round_id,
                "seq": seq,
                "occurred_at": occurred_at,
                "payload": step.payload,
            }
            body = (
                f'{{"event_id":"{event_id}","event_type":"{kind}{middle}{seq},'
                f'"occurred_at":"{occurred_at}","payload":{dumps(step.payload)}}}'
            )
            routing_key = f"{table_id}.{kind}"
            messages.append(
                FeedMessage(routing_key, body.encode(), event_id, event, table_id, step.fault)
            )
        return messages


_COMPACT = json.JSONEncoder(separators=(",", ":"))
_TYPE_TEXT = {kind: kind.value for kind in EventType}
_UUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID_SET = (4 << 76) | (0x8000 << 48)


def uuid4_text(bits: int) -> str:
    """The text of ``uuid.UUID(int=bits, version=4)``, without building the object."""
    h = f"{(bits & _UUID_CLEAR) | _UUID_SET:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
