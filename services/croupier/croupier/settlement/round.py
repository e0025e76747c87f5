"""The Round aggregate: one round of either game, built only from its own ledger facts.

A feed event goes to :meth:`Round.receive`, which decides what it means and returns the facts
to record; :meth:`Round.apply` folds a fact into the state, so a round read back from the
ledger is the round that was written. What it enforces (docs/feed.md, docs/rules.md):

- Order: events apply in ``seq`` order. One ahead of its turn is *held* and applied when the
  gap fills. A redelivered event is a no-op; a reused ``event_id`` with other content is
  rejected.
- The first event (seq 1) opens the round with a game and a pay table that exist and agree.
- Wagers: only before the first card; spots the pay table offers; within its stake limits;
  side bets on a box where the same player has an ante; bet ids unique in the round.
- Cards: real cards, each at most once per round (burns included); two per box, two for the
  dealer, five on the board.
- Decisions: for a known ante, at its stage (Casino Hold'em: after the flop, before the turn;
  Texas Hold'em Plus: preflop before the flop, flop before the turn, turn before the river),
  one per stage, none after a fold; a call is exactly 2x the ante, a bet exactly 1x.
- Completion: every card dealt, then settle (undecided players take the timeout defaults).
  A completion with cards missing is rejected and the round stays open.
- Void: every wager refunded.
- Timeout: a round still open after the round timeout is voided by Croupier itself
  (:meth:`Round.time_out`): a ``round.voided`` fact with code ``round_timeout``, every wager
  refunded like a studio void. Later events of the round are rejected (``after_timeout``).

A rejected event never changes the state, except that it uses up its ``seq`` so that the
rest of the round can go on. A message the contract refuses whose table, round and ``seq``
can be read takes that place too (:meth:`Round.refuse`): the round goes on exactly as if the
studio had never sent it, and the events held behind it are released.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final, NamedTuple

import holdem
from contract import feed
from contract.canonical import Encoded
from contract.codes import RejectionCode
from contract.events import (
    BetPlaced,
    CardsDealt,
    DecisionMade,
    FeedEvent,
    RoundOpened,
    RoundVoided,
    event_json,
    from_model,
    read_event,
)
from contract.feed import MAX_REASON_LENGTH, MAX_SEQ, SCHEMA_VERSION, EventType, Target
from croupier.settlement.facts import DealCards, Fact, Movement, PayTableRef, Posting, ResultLine
from holdem import PayTable, Spot, Stage
from holdem.kinds import SeatKind, settle_kinds
from holdem.schedule import (
    PLAY_SPOTS,
    DecisionStage,
    decision_stage,
    folds_before,
    play_spot,
    schedule,
)
from holdem.values import quick

# Fact types recorded in a round's ledger stream.
ACCEPTED: Final = "feed.accepted"
HELD: Final = "feed.held"
REJECTED: Final = "feed.rejected"
SETTLED: Final = "round.settled"
VOIDED: Final = "round.voided"
#: Written by earlier versions when a round outlived the round timeout (a report; the round
#: stayed open). Read back as nothing: the round is open, and times out into a void now.
TIMED_OUT: Final = "round.timed_out"
#: The namespace of the event ids of the voids Croupier records when a round times out.
_TIMEOUT_NAMESPACE: Final = uuid.UUID("0d9b6c52-3f0e-4f0f-8d3c-6a1f2b7e9c41")

#: A function giving the jackpot meter of a pay table in a currency before this round.
MeterReader = Callable[[PayTable, str], int]


class Status(StrEnum):
    """Where a round stands."""

    OPEN = "open"
    SETTLED = "settled"
    VOIDED = "voided"


class Rejection(Exception):
    """An event the round refuses: a short ``code`` for metrics, and a reason to act on."""

    def __init__(self, code: RejectionCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code


@quick
@dataclass(frozen=True, slots=True)
class PlacedBet:
    """A wager in the round: a placed bet or a play wager made by a decision."""

    bet_id: str
    player_id: str
    box: str
    spot: Spot
    amount: int
    currency: str


class Received(NamedTuple):
    """A feed event as received: its JSON form (with its canonical text) and fingerprint,
    worked out once per delivery (a named tuple: one per message, built cheaply)."""

    event: FeedEvent
    dump: Encoded
    digest: str

    def fact(self, type_: str, key: str, **extra: Any) -> Fact:
        """A fact recording this event, with ``extra`` data beside it.

        Its data carries its canonical text (:class:`Encoded`, the event's text spliced
        in), so the ledger does not encode it again: a Round's facts hold text, integers,
        booleans and None, never a float.
        """
        assert not extra.keys() & {"event", "fingerprint"}, "extra data shadows the event"
        data = {"event": self.dump, "fingerprint": self.digest, **extra}
        if extra:
            return Fact(type_, Encoded.plain(data), key)
        # The keys in canonical order and a hex digest: the text is written as it stands.
        text = f'{{"event":{self.dump.text},"fingerprint":"{self.digest}"}}'
        return Fact(type_, Encoded.with_text(data, text), key)


def received(event: FeedEvent) -> Received:
    """The event with its JSON form and its fingerprint (a digest of its canonical text)."""
    dump = event_json(event)
    return Received(event, dump, hashlib.sha256(dump.text.encode()).hexdigest()[:32])


def stream_name(table_id: str, round_id: str) -> str:
    """The ledger stream of a round."""
    return f"round:{table_id}:{round_id}"


_SIDE_BETS: Final = frozenset({Spot.AA_BONUS, Spot.JACKPOT, Spot.PLUS})


@dataclass
class Round:
    """The state of one round."""

    table_id: str
    round_id: str
    status: Status = Status.OPEN
    table: PayTable | None = None
    next_seq: int = 1
    seen: dict[str, str] = field(default_factory=dict)
    held: dict[int, FeedEvent] = field(default_factory=dict)
    bets: dict[str, PlacedBet] = field(default_factory=dict)
    decisions: dict[tuple[str, Stage], holdem.Decision] = field(default_factory=dict)
    hole: dict[str, list[int]] = field(default_factory=dict)
    dealer: list[int] = field(default_factory=list)
    board: list[int] = field(default_factory=list)
    dealt: dict[int, str] = field(default_factory=dict)
    #: Seqs taken by messages the contract refused, with the key of the fact keeping each.
    refused: dict[int, str] = field(default_factory=dict)
    #: The antes in ``bets`` by (player_id, box): a round can seat thousands of players.
    antes: dict[tuple[str, str], PlacedBet] = field(default_factory=dict)
    #: Voided by Croupier because it stayed open past the round timeout.
    timed_out: bool = False
    #: Wall-clock seconds: the round's first fact, and the oldest event held now (if any).
    started_at: float | None = None
    held_since: float | None = None

    @property
    def stream(self) -> str:
        """This round's ledger stream."""
        return stream_name(self.table_id, self.round_id)

    @property
    def waiting_for(self) -> str | None:
        """Why an open round is not settled yet, for reports."""
        if self.status is not Status.OPEN:
            return None
        if self.held:
            return f"waiting for seq {self.next_seq} (held: {sorted(self.held)})"
        return "waiting for round.completed" if self.table else "never opened"

    # -- deciding --------------------------------------------------------------------------

    def receive(self, event: FeedEvent, meters: MeterReader) -> list[Fact]:
        """The facts an incoming feed event leads to (none for a redelivery).

        The facts are already applied to this round when it returns.
        """
        arrival = received(event)
        known = self.seen.get(event.event_id)
        if known == arrival.digest:
            return []
        if known is not None:
            reason = f"event_id {event.event_id} was already used for an event with other content"
            return self._refuse(arrival, RejectionCode.REUSED_EVENT_ID, reason)
        if self.timed_out:
            reason = (
                f"round {self.round_id} on table {self.table_id} was voided by Croupier: it "
                "stayed open past the round timeout, and every wager was refunded"
            )
            return self._refuse(arrival, RejectionCode.AFTER_TIMEOUT, reason)
        if not self._free(event.seq):
            reason = f"seq {event.seq} of round {self.round_id} is already taken by another event"
            return self._refuse(arrival, RejectionCode.SEQ_TAKEN, reason)
        if event.seq > self.next_seq and self.status is not Status.OPEN:
            # Nothing is held for a closed round: it would wait for a gap that never fills.
            reason = f"round {self.round_id} is already {self.status}"
            return self._refuse(arrival, RejectionCode.ROUND_CLOSED, reason)
        if event.seq > self.next_seq:
            held = arrival.fact(HELD, f"{event.event_id}:held")
            return [self._record(held, event)]
        return [self._record(self._decide(arrival, meters), event), *self._release(meters)]

    def refuse(self, seq: int, kept: Fact, meters: MeterReader) -> list[Fact] | None:
        """Let a message the contract refused, kept as the ``feed.rejected`` fact ``kept``
        (its raw text, code and reason), take ``seq`` of this open round; the facts then
        recorded: the refusal, and the held events it releases. None when the place is not
        free (taken, or the round closed): the refusal then belongs to no round. No facts
        when this very refusal took it before (a redelivery).
        """
        if self.refused.get(seq) == kept.key:
            return []
        if self.status is not Status.OPEN or self.timed_out or not self._free(seq):
            return None
        fact = Fact(REJECTED, {**kept.data, "seq": seq, "uses_seq": True}, kept.key)
        self._take(seq, fact.key)
        return [fact, *self._release(meters)]

    def _free(self, seq: int) -> bool:
        return seq >= self.next_seq and seq not in self.held and seq not in self.refused

    def _release(self, meters: MeterReader) -> list[Fact]:
        """Decide the held events whose turn has come, in ``seq`` order."""
        facts = []
        while self.next_seq in self.held:
            waiting = self.held[self.next_seq]
            facts.append(self._record(self._decide(received(waiting), meters), waiting))
        return facts

    def _take(self, seq: int, key: str) -> None:
        """A refused message takes ``seq``: the round moves past it when its turn comes."""
        self.refused[seq] = key
        self._advance(self.next_seq)

    def _advance(self, seq: int) -> None:
        """The next seq is ``seq``, or the first after it no refused message took."""
        while seq in self.refused:
            seq += 1
        self.next_seq = seq

    def expire_held(self, seconds: float) -> list[Fact]:
        """Reject every held event: the gap before it did not fill within ``seconds``."""
        code = RejectionCode.HELD_TIMEOUT if self.table else RejectionCode.NEVER_OPENED
        reason = (
            f"held for seq {self.next_seq} of round {self.round_id} on table {self.table_id}, "
            f"which did not arrive within {seconds:g} s"
        )
        held = [self.held[seq] for seq in sorted(self.held)]
        self.held_since = None
        return [self._record(_rejected(received(e), code, reason, uses_seq=False), e) for e in held]

    def time_out(self, seconds: float, now: float, waiting_for: str) -> Fact:
        """Void this opened round: still open after ``seconds`` at ``now`` (wall clock).

        The void is Croupier's own ``round.voided`` event (its id derived from the round, at
        the next ``seq``), recorded with code ``round_timeout`` and what the round waited
        for; every wager is refunded as in a studio void. Read back, it is a void like any.
        """
        reason = (
            f"voided by Croupier: still open after the round timeout of {seconds:g} s "
            f"({waiting_for})"
        )[:MAX_REASON_LENGTH]
        model = feed.RoundVoided(
            event_id=str(uuid.uuid5(_TIMEOUT_NAMESPACE, self.stream)),
            event_type=EventType.ROUND_VOIDED,
            schema_version=SCHEMA_VERSION,
            table_id=self.table_id,
            round_id=self.round_id,
            seq=min(self.next_seq, MAX_SEQ),
            occurred_at=datetime.fromtimestamp(now, UTC),
            payload=feed.RoundVoidedPayload(reason=reason),
        )
        event = from_model(model)
        assert type(event) is RoundVoided
        extra = {"code": RejectionCode.ROUND_TIMEOUT, "waiting_for": waiting_for}
        return self._record(self._void(event, received(event), extra), event)

    def abandon(self) -> list[Fact]:
        """Reject what a round that never opened holds (its feed ended without seq 1)."""
        reason = (
            f"round {self.round_id} on table {self.table_id} was never opened: "
            "no round.opened (seq 1) arrived"
        )
        return [
            self._record(
                _rejected(received(e), RejectionCode.NEVER_OPENED, reason, uses_seq=False), e
            )
            for e in [self.held[seq] for seq in sorted(self.held)]
        ]

    def _refuse(self, arrival: Received, code: RejectionCode, reason: str) -> list[Fact]:
        """Reject an event without using up its ``seq``."""
        return [self._record(_rejected(arrival, code, reason, uses_seq=False), arrival.event)]

    def _record(self, fact: Fact, event: FeedEvent) -> Fact:
        self._apply(fact, event)
        return fact

    def _decide(self, arrival: Received, meters: MeterReader) -> Fact:
        event = arrival.event
        try:
            self._check(event)
            if event.event_type is EventType.ROUND_COMPLETED:
                return self._settle(arrival, meters)
            if type(event) is RoundVoided:
                return self._void(event, arrival)
        except Rejection as rejection:
            return _rejected(arrival, rejection.code, str(rejection), uses_seq=True)
        key = f"{event.event_id}:accepted"
        if type(event) is RoundOpened:
            table = holdem.load_paytable(event.payload.paytable)
            return arrival.fact(ACCEPTED, key, paytable=_paytable_data(table))
        return arrival.fact(ACCEPTED, key)

    def _check(self, event: FeedEvent) -> None:
        if type(event) is RoundOpened:
            self._check_open(event)
            return
        if self.table is None:
            raise Rejection(
                RejectionCode.NEVER_OPENED,
                f"round {self.round_id} on table {self.table_id} was never opened: "
                "its first event (seq 1) must be round.opened",
            )
        if self.status is not Status.OPEN:
            raise Rejection(
                RejectionCode.ROUND_CLOSED, f"round {self.round_id} is already {self.status}"
            )
        if type(event) is BetPlaced:
            self._check_bet(event)
        elif type(event) is CardsDealt:
            self._check_cards(event)
        elif type(event) is DecisionMade:
            self._check_decision(event)
        elif event.event_type is EventType.ROUND_COMPLETED:
            self._check_complete()

    def _check_open(self, event: RoundOpened) -> None:
        if self.table is not None:
            raise Rejection(RejectionCode.ALREADY_OPEN, f"round {self.round_id} is already open")
        if event.seq != 1:
            raise Rejection(
                RejectionCode.OPEN_NOT_FIRST,
                f"round.opened must be the round's first event (seq 1), not {event.seq}",
            )
        try:
            table = holdem.load_paytable(event.payload.paytable)
        except holdem.PayTableError as error:
            raise Rejection(RejectionCode.UNKNOWN_PAYTABLE, str(error)) from None
        if table.game != event.payload.game:
            opened = event.payload.game
            raise Rejection(
                RejectionCode.PAYTABLE_GAME_MISMATCH,
                f"pay table {table.id} is for {table.game}, not {opened}",
            )

    def _check_bet(self, event: BetPlaced) -> None:
        bet, table = event.payload, self._table
        if self.dealt:
            raise Rejection(
                RejectionCode.BETTING_CLOSED,
                f"bet {bet.bet_id} came after betting closed (cards were dealt)",
            )
        if bet.bet_id in self.bets:
            raise Rejection(
                RejectionCode.DUPLICATE_BET_ID, f"bet_id {bet.bet_id} is already used in this round"
            )
        spot = bet.spot
        if not table.offers(spot):
            raise Rejection(
                RejectionCode.SPOT_NOT_OFFERED, f"pay table {table.id} offers no {spot} bet"
            )
        limit = table.limit(spot)
        if limit is None or not limit.admits(bet.amount):
            bounds = f"{limit.min}..{limit.max}" if limit else "none"
            raise Rejection(
                RejectionCode.STAKE_LIMITS,
                f"{spot} of {bet.amount} is outside the table's limits {bounds}",
            )
        ante = self._ante_of(bet.player_id, bet.box)
        if spot is Spot.ANTE and ante is not None:
            raise Rejection(
                RejectionCode.DUPLICATE_ANTE,
                f"player {bet.player_id} already has ante {ante.bet_id} on box {bet.box}",
            )
        if spot in _SIDE_BETS and ante is None:
            raise Rejection(
                RejectionCode.SIDE_BET_WITHOUT_ANTE,
                f"{spot} bet {bet.bet_id} needs an ante by player {bet.player_id} on box {bet.box}",
            )
        if ante is not None and ante.currency != bet.currency:
            raise Rejection(
                RejectionCode.CURRENCY_MISMATCH,
                f"{spot} in {bet.currency} but its ante is in {ante.currency}",
            )

    def _check_cards(self, event: CardsDealt) -> None:
        deal = event.payload
        cards = [holdem.parse_card(card) for card in deal.cards]
        for card in cards:
            if card in self.dealt:
                text = holdem.card_text(card)
                raise Rejection(
                    RejectionCode.DUPLICATE_CARD,
                    f"card {text} was already dealt in this round ({self.dealt[card]})",
                )
        have, most, who = self._hand_of(deal.target, deal.box)
        if len(have) + len(cards) > most:
            raise Rejection(
                RejectionCode.TOO_MANY_CARDS,
                f"{who} would hold {len(have) + len(cards)} cards; at most {most}",
            )

    def _check_decision(self, event: DecisionMade) -> None:
        move = event.payload
        ante = self.bets.get(move.ante_bet_id)
        if ante is None or ante.spot is not Spot.ANTE:
            raise Rejection(
                RejectionCode.UNKNOWN_ANTE, f"decision for unknown ante {move.ante_bet_id}"
            )
        stage, action = move.stage, move.action
        rules = self._stage_rules(stage)
        board_size = rules.board_before
        if len(self.board) != board_size or len(self.hole.get(ante.box, ())) != 2:
            raise Rejection(
                RejectionCode.WRONG_STAGE,
                f"a {stage} decision must come after the {ante.box} hole cards with "
                f"{board_size} board cards; the board has {len(self.board)}",
            )
        if action not in rules.actions:
            raise Rejection(
                RejectionCode.WRONG_ACTION,
                f"{action} is not a {stage} action; allowed: {sorted(rules.actions)}",
            )
        if (ante.bet_id, stage) in self.decisions:
            raise Rejection(
                RejectionCode.SECOND_DECISION, f"ante {ante.bet_id} already has a {stage} decision"
            )
        if self._folded(ante.bet_id, stage):
            raise Rejection(
                RejectionCode.AFTER_FOLD, f"ante {ante.bet_id} has folded (or did not call in time)"
            )
        if action is rules.wager_action:
            self._check_play_wager(move.bet_id, move.amount, ante, rules)

    def _check_play_wager(
        self, bet_id: str | None, amount: int | None, ante: PlacedBet, rules: DecisionStage
    ) -> None:
        action, size = rules.wager_action, rules.multiple
        if amount != size * ante.amount:
            raise Rejection(
                RejectionCode.WRONG_WAGER_SIZE,
                f"a {action} must be exactly {size}x the ante {ante.amount}, got {amount}",
            )
        if bet_id is None or bet_id in self.bets:
            raise Rejection(
                RejectionCode.DUPLICATE_BET_ID, f"bet_id {bet_id} is already used in this round"
            )

    def _check_complete(self) -> None:
        missing = []
        if len(self.dealer) != 2:
            missing.append(f"dealer has {len(self.dealer)} of 2")
        if len(self.board) != 5:
            missing.append(f"board has {len(self.board)} of 5")
        for box in sorted({bet.box for bet in self.bets.values()} | set(self.hole)):
            if len(self.hole.get(box, ())) != 2:
                missing.append(f"box {box} has {len(self.hole.get(box, ()))} of 2")
        if missing:
            raise Rejection(
                RejectionCode.CARDS_MISSING,
                "round completed with cards missing: " + "; ".join(missing),
            )

    # -- settling --------------------------------------------------------------------------

    def _settle(self, arrival: Received, meters: MeterReader) -> Fact:
        table = self._table
        deal = holdem.Deal(
            boxes={box: (cards[0], cards[1]) for box, cards in self.hole.items()},
            dealer=(self.dealer[0], self.dealer[1]),
            board=tuple(self.board),
        )
        by_kind = self._settle_by_kind(table, deal)
        if by_kind is None:
            results, movements, hands = self._settle_per_bet(table, deal, meters)
        else:
            (results, hands), movements = by_kind, []
        return arrival.fact(
            SETTLED,
            f"{arrival.event.event_id}:settled",
            paytable=_paytable_data(table),
            deal=_deal_data(deal),
            folds=self._folds(),
            hands=hands,
            results=results,
            jackpot=movements,
            postings=postings(results, movements),
        )

    def _settle_per_bet(
        self, table: PayTable, deal: holdem.Deal, meters: MeterReader
    ) -> tuple[list[ResultLine], list[Movement], dict[str, str]]:
        """Every wager through :func:`holdem.settle`, one currency at a time."""
        results: list[ResultLine] = []
        movements: list[Movement] = []
        hands: dict[str, str] = {}
        for currency, wagers, decisions in self._by_currency():
            jackpot = any(w.spot is Spot.JACKPOT for w in wagers)
            meter = meters(table, currency) if jackpot else None
            settled = holdem.settle(table, deal, wagers, decisions, meter)
            results += [_result_data(r, currency) for r in settled.results]
            if settled.meter is not None:
                movements.append(_movement_data(settled.meter, currency))
            hands = dict(settled.hands)
        return results, movements, hands

    def _settle_by_kind(
        self, table: PayTable, deal: holdem.Deal
    ) -> tuple[list[ResultLine], dict[str, str]] | None:
        """What :meth:`_settle_per_bet` gives, each kind of seat settled once
        (:mod:`holdem.kinds`): the same results, in the same order. None for a round with
        a jackpot wager (its results are not per seat)."""
        placed = [b for b in self.bets.values() if b.spot not in PLAY_SPOTS]
        if not placed:
            return [], {}
        if any(b.spot is Spot.JACKPOT for b in placed):
            return None
        # Each placed bet's seat (by number) and place in it; a seat's ante comes first.
        seat_number: dict[tuple[str, str], int] = {}
        seats: list[list[PlacedBet]] = []
        where: list[tuple[int, int]] = []
        for bet in placed:
            number = seat_number.setdefault((bet.player_id, bet.box), len(seats))
            if number == len(seats):
                seats.append([])
            where.append((number, len(seats[number])))
            seats[number].append(bet)
        moves: dict[str, list[holdem.Decision]] = {}
        steps: list[tuple[holdem.Decision, int]] = []  # each decision, its index on its ante
        for decision in self.decisions.values():
            made = moves.setdefault(decision.ante_bet_id, [])
            steps.append((decision, len(made)))
            made.append(decision)
        # Seats are told apart by plain text and integers (an enum member hashes in Python).
        signatures: dict[tuple[Any, ...], int] = {}
        kinds: list[SeatKind] = []
        kind_of_seat: list[int] = []
        kind_of_ante: dict[str, int] = {}
        for seat in seats:
            ante = seat[0]
            made = moves.get(ante.bet_id, [])
            signature = (
                ante.box,
                *[(b.spot._value_, b.amount) for b in seat],
                None,
                *[(d.stage._value_, d.action._value_, d.amount) for d in made],
            )
            number = signatures.setdefault(signature, len(kinds))
            if number == len(kinds):
                wagers = tuple((b.spot, b.amount) for b in seat)
                kinds.append(
                    SeatKind(ante.box, wagers, tuple((d.stage, d.action, d.amount) for d in made))
                )
            kind_of_seat.append(number)
            kind_of_ante[ante.bet_id] = number
        settled, hands = settle_kinds(table, deal, kinds)
        # What a kind's result lines hold besides bet_id, player_id and currency, once.
        wager_lines = [[_kind_line(r) for r in k.wagers] for k in settled]
        play_lines = [{i: _kind_line(r) for i, r in k.plays.items()} for k in settled]
        results: list[ResultLine] = []
        for currency in sorted({b.currency for b in placed}):
            for bet, (number, index) in zip(placed, where, strict=True):
                if bet.currency != currency:
                    continue
                kind_line = wager_lines[kind_of_seat[number]][index]
                assert kind_line[2] == bet.amount and kind_line[0] == bet.box, "the bet's own kind"
                results.append(_seat_line(bet.bet_id, bet.player_id, kind_line, currency))
            for decision, index in steps:
                ante = self.bets[decision.ante_bet_id]
                plays = play_lines[kind_of_ante[ante.bet_id]]
                if ante.currency != currency or index not in plays:
                    continue
                assert decision.bet_id is not None, "a play wager has its bet id"
                assert plays[index][2] == decision.amount, "the play wager's own kind"
                results.append(_seat_line(decision.bet_id, ante.player_id, plays[index], currency))
        # self.bets holds the placed bets and the play wagers the decisions made.
        assert len(results) == len(self.bets), "one result line per wager"
        return results, hands

    def _folds(self) -> dict[str, str]:
        """The stage of each fold decision, by ante (calls and bets show in the results)."""
        return {
            ante: str(stage)
            for (ante, stage), decision in sorted(self.decisions.items())
            if decision.action is holdem.Action.FOLD
        }

    def _void(
        self, event: RoundVoided, arrival: Received, extra: Mapping[str, Any] | None = None
    ) -> Fact:
        results: list[ResultLine] = []
        for currency, wagers, decisions in self._by_currency():
            results += [_result_data(r, currency) for r in holdem.void(wagers, decisions).results]
        return arrival.fact(
            VOIDED,
            f"{event.event_id}:voided",
            paytable=_paytable_data(self._table),
            reason=event.payload.reason,
            results=results,
            jackpot=[],
            postings=postings(results, []),
            **(extra or {}),
        )

    def _by_currency(self) -> Iterator[tuple[str, list[holdem.Wager], list[holdem.Decision]]]:
        placed = [b for b in self.bets.values() if b.spot not in PLAY_SPOTS]
        for currency in sorted({b.currency for b in placed}):
            wagers = [
                holdem.Wager(b.bet_id, b.player_id, b.box, b.spot, b.amount)
                for b in placed
                if b.currency == currency
            ]
            antes = {w.bet_id for w in wagers if w.spot is Spot.ANTE}
            decisions = [d for d in self.decisions.values() if d.ante_bet_id in antes]
            yield currency, wagers, decisions

    # -- applying facts --------------------------------------------------------------------

    def apply(self, fact: Fact) -> None:
        """Fold one recorded fact into the state (reading a round back from the ledger)."""
        if fact.type == TIMED_OUT:
            return
        if fact.type == REJECTED and "raw" in fact.data:
            self._take(fact.data["seq"], fact.key)
            return
        self._apply(fact, read_event(json.dumps(fact.data["event"])))

    def _apply(self, fact: Fact, event: FeedEvent) -> None:
        if fact.type == HELD:
            self.seen[event.event_id] = fact.data["fingerprint"]
            self.held[event.seq] = event
            return
        self.seen.setdefault(event.event_id, fact.data["fingerprint"])
        if fact.type == REJECTED and not fact.data["uses_seq"]:
            if self.held.get(event.seq) == event:
                del self.held[event.seq]
            return
        self.held.pop(event.seq, None)
        self._advance(event.seq + 1)
        if fact.type == ACCEPTED and type(event) is RoundOpened:
            paytable = fact.data["paytable"]
            self.table = holdem.load_paytable(paytable["id"], paytable["version"])
        elif fact.type == ACCEPTED:
            self._accept(event)
        elif fact.type == SETTLED:
            self.status = Status.SETTLED
        elif fact.type == VOIDED:
            self.status = Status.VOIDED
            self.timed_out = fact.data.get("code") == RejectionCode.ROUND_TIMEOUT

    def _accept(self, event: FeedEvent) -> None:
        if type(event) is BetPlaced:
            bet = event.payload
            placed = PlacedBet(
                bet.bet_id, bet.player_id, bet.box, bet.spot, bet.amount, bet.currency
            )
            self.bets[bet.bet_id] = placed
            if placed.spot is Spot.ANTE:
                self.antes.setdefault((placed.player_id, placed.box), placed)
        elif type(event) is CardsDealt:
            if event.payload.target is Target.PLAYER:
                self.hole.setdefault(event.payload.box or "", [])
            have, _, who = self._hand_of(event.payload.target, event.payload.box)
            for text in event.payload.cards:
                card = holdem.parse_card(text)
                have.append(card)
                self.dealt[card] = who
        elif type(event) is DecisionMade:
            self._accept_decision(event)

    def _accept_decision(self, event: DecisionMade) -> None:
        move = event.payload
        stage, action = move.stage, move.action
        decision = holdem.Decision(move.ante_bet_id, stage, action, move.bet_id, move.amount)
        self.decisions[(move.ante_bet_id, stage)] = decision
        spot = play_spot(stage, action)
        if spot is not None and move.bet_id is not None and move.amount is not None:
            ante = self.bets[move.ante_bet_id]
            self.bets[move.bet_id] = PlacedBet(
                move.bet_id, ante.player_id, ante.box, spot, move.amount, ante.currency
            )

    # -- helpers ---------------------------------------------------------------------------

    @property
    def _table(self) -> PayTable:
        assert self.table is not None, "checked by _check"
        return self.table

    def _ante_of(self, player_id: str, box: str) -> PlacedBet | None:
        return self.antes.get((player_id, box))

    def _hand_of(self, target: Target, box: str | None) -> tuple[list[int], int, str]:
        if target is Target.PLAYER:
            return self.hole.get(box or "", []), 2, f"box {box}"
        if target is Target.DEALER:
            return self.dealer, 2, "the dealer"
        if target is Target.BOARD:
            return self.board, 5, "the board"
        return [], 52, "the burn pile"

    def _stage_rules(self, stage: Stage) -> DecisionStage:
        rules = decision_stage(self._table.game, stage)
        if rules is None:
            raise Rejection(
                RejectionCode.WRONG_STAGE, f"{self._table.game} has no {stage} decision"
            )
        return rules

    def _folded(self, ante_bet_id: str, stage: Stage) -> bool:
        game = self._table.game
        decided = {
            s.stage: d.action
            for s in schedule(game)
            if (d := self.decisions.get((ante_bet_id, s.stage))) is not None
        }
        return folds_before(game, stage, decided)


def _deal_data(deal: holdem.Deal) -> DealCards:
    """The cards a round was settled on, as card text: what its integrity terms come from."""
    return {
        "boxes": {box: holdem.cards_text(hole) for box, hole in sorted(deal.boxes.items())},
        "dealer": holdem.cards_text(deal.dealer),
        "board": holdem.cards_text(deal.board),
    }


def _paytable_data(table: PayTable) -> PayTableRef:
    return {"id": table.id, "version": table.version, "hash": table.content_hash}


def _rejected(arrival: Received, code: RejectionCode, reason: str, *, uses_seq: bool) -> Fact:
    key = f"{arrival.event.event_id}:rejected:{arrival.digest}"
    return arrival.fact(REJECTED, key, code=code, reason=reason, uses_seq=uses_seq)


def _kind_line(result: holdem.BetResult) -> tuple[str, str, int, int, str, str | None]:
    """A result's box, spot, stake, returned, outcome and line, as its result line has them."""
    return (
        result.box,
        str(result.spot),
        result.stake,
        result.returned,
        str(result.outcome),
        result.line,
    )


def _seat_line(
    bet_id: str,
    player_id: str,
    kind_line: tuple[str, str, int, int, str, str | None],
    currency: str,
) -> ResultLine:
    """A wager's result line from its kind's (:func:`_kind_line`)."""
    box, spot, stake, returned, outcome, line = kind_line
    return {
        "bet_id": bet_id,
        "player_id": player_id,
        "box": box,
        "spot": spot,
        "stake": stake,
        "returned": returned,
        "outcome": outcome,
        "line": line,
        "currency": currency,
    }


def _result_data(result: holdem.BetResult, currency: str) -> ResultLine:
    return {
        "bet_id": result.bet_id,
        "player_id": result.player,
        "box": result.box,
        "spot": str(result.spot),
        "stake": result.stake,
        "returned": result.returned,
        "outcome": str(result.outcome),
        "line": result.line,
        "currency": currency,
    }


def _movement_data(meter: holdem.MeterMovement, currency: str) -> Movement:
    return {
        "currency": currency,
        "before": meter.before,
        "contributed": meter.contributed,
        "awarded": meter.awarded,
        "reseeded": meter.reseeded,
        "after": meter.after,
    }


def postings(results: list[ResultLine], movements: list[Movement]) -> list[Posting]:
    """Balanced double-entry postings of a round, per currency (each currency sums to zero).

    Stakes leave the round's escrow, players receive what is returned, the jackpot meter
    moves by its contributions, awards and reseeds, and the house takes the difference.
    """
    out: list[Posting] = []
    for currency in sorted({r["currency"] for r in results}):
        mine = [r for r in results if r["currency"] == currency]
        staked = sum(r["stake"] for r in mine)
        meter = sum(
            m["contributed"] - m["awarded"] + m["reseeded"]
            for m in movements
            if m["currency"] == currency
        )
        players: dict[str, int] = {}
        for r in mine:
            players[r["player_id"]] = players.get(r["player_id"], 0) + r["returned"]
        lines = [("escrow", -staked), *((f"player:{p}", v) for p, v in sorted(players.items()))]
        if meter:
            lines.append(("jackpot", meter))
        lines.append(("house", staked - sum(players.values()) - meter))
        assert sum(amount for _, amount in lines) == 0, f"{currency} postings must balance"
        out += [{"currency": currency, "account": a, "amount": v} for a, v in lines]
    return out
