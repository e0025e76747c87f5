"""Faults a real studio produces, injected into rounds on request.

Round faults edit the draft before it is numbered (the feed then has contiguous ``seq``):
a misdeal void, a card read twice, a card text that is no card, a round completed with cards
missing, a call of the wrong size, a bet after betting closed. Transport faults act on the
sent messages: a redelivered copy, two adjacent events swapped, a torn (non-JSON) line.
Each injected fault is marked on the step or message that carries it.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from contract.feed import EventType, Target
from holdem import Action, Spot
from holdem.schedule import SCHEDULES
from studio.config import Faults
from studio.message import FeedMessage
from studio.table import Draft, Step

VOID_REASONS = (
    "misdeal: a card was exposed",
    "misdeal: wrong number of cards dealt",
    "shuffler fault: the round is cancelled",
    "scanner fault: the deal could not be read",
)
NOT_CARDS = ("1x", "Zz", "10h", "A", "??")
#: The stages at which a game admits a call (holdem.schedule), by name.
_CALL_STAGES = frozenset(
    s.stage.value for stages in SCHEDULES.values() for s in stages if Action.CALL in s.actions
)


def fault_round(draft: Draft, faults: Faults, rng: random.Random) -> None:
    """Inject each round fault into ``draft`` at its rate."""
    for kind, inject in _ROUND_FAULTS:
        rate = getattr(faults, kind)
        if rate and rng.random() < rate:
            inject(draft, rng)


def fault_messages(
    messages: list[FeedMessage], faults: Faults, rng: random.Random
) -> list[FeedMessage]:
    """The round's messages with each transport fault injected at its rate."""
    if faults.out_of_order and rng.random() < faults.out_of_order:
        messages = _swap_adjacent(messages, rng)
    if faults.redelivery and rng.random() < faults.redelivery:
        messages = _redeliver(messages, rng)
    if faults.malformed and rng.random() < faults.malformed:
        messages = _tear(messages, rng)
    return messages


# ---------------------------------------------------------------- round faults


def _void(draft: Draft, rng: random.Random) -> None:
    """Cut the round part-way (after at least one bet) and void it."""
    cut = rng.randrange(2, len(draft.steps) - 1)
    draft.steps[cut:] = [
        Step(
            EventType.ROUND_VOIDED,
            {"reason": rng.choice(VOID_REASONS)},
            draft.steps[cut - 1].at_ms + 1_500,
            "void",
        )
    ]


def _deals(draft: Draft) -> list[int]:
    return [i for i, s in enumerate(draft.steps) if s.event_type is EventType.CARDS_DEALT]


def _duplicate_card(draft: Draft, rng: random.Random) -> None:
    """A card already dealt in the round is read again in a later deal."""
    deals = _deals(draft)
    if len(deals) < 2:
        return
    later = rng.choice(deals[1:])
    earlier = [c for i in deals if i < later for c in draft.steps[i].payload["cards"]]
    _replace_card(draft.steps[later], rng, rng.choice(earlier), "duplicate_card")


def _bad_card(draft: Draft, rng: random.Random) -> None:
    """One dealt card's text is no card."""
    deals = _deals(draft)
    if deals:
        _replace_card(draft.steps[rng.choice(deals)], rng, rng.choice(NOT_CARDS), "bad_card")


def _replace_card(step: Step, rng: random.Random, text: str, fault: str) -> None:
    cards = list(step.payload["cards"])
    cards[rng.randrange(len(cards))] = text
    step.payload = {**step.payload, "cards": cards}
    step.fault = fault


def _missing_cards(draft: Draft, rng: random.Random) -> None:
    """Drop the river (and its burn): the round completes with four board cards."""
    steps = draft.steps
    if steps[-1].event_type is not EventType.ROUND_COMPLETED:
        return
    board = [i for i in _deals(draft) if steps[i].payload["target"] == Target.BOARD]
    river = board[-1]
    burn = river - 1 if steps[river - 1].payload.get("target") == Target.BURN else river
    del steps[burn : river + 1]
    steps[-1].fault = "missing_cards"


def _wrong_call(draft: Draft, rng: random.Random) -> None:
    """A call that is not 2x its ante: an existing call, or else a fold turned into one."""
    decisions = [s for s in draft.steps if s.event_type is EventType.DECISION_MADE]
    calls = [s for s in decisions if s.payload["action"] == Action.CALL]
    folds = [
        s
        for s in decisions
        if s.payload["action"] == Action.FOLD and s.payload["stage"] in _CALL_STAGES
    ]
    if not calls and not folds:
        return
    step = rng.choice(calls or folds)
    ante = _antes(draft)[step.payload["ante_bet_id"]]
    bet_id = step.payload.get("bet_id") or draft.new_bet_id()
    amount = ante * rng.choice((1, 3)) if rng.random() < 0.5 else 2 * ante + 100
    step.payload = {**step.payload, "action": Action.CALL.value, "bet_id": bet_id}
    step.payload["amount"] = amount
    step.fault = "wrong_call"


def _antes(draft: Draft) -> dict[str, int]:
    return {
        s.payload["bet_id"]: s.payload["amount"]
        for s in draft.steps
        if s.event_type is EventType.BET_PLACED and s.payload["spot"] == Spot.ANTE
    }


def _late_bet(draft: Draft, rng: random.Random) -> None:
    """An ante placed after the first deal closed betting."""
    steps = draft.steps
    deals = _deals(draft)
    ante = next((s for s in steps if s.event_type is EventType.BET_PLACED), None)
    if not deals or ante is None:  # voided before the deal, or nobody bet: no late bet
        return
    at = rng.randrange(deals[0] + 1, len(steps))
    payload: dict[str, Any] = {**ante.payload, "bet_id": draft.new_bet_id()}
    steps.insert(at, Step(EventType.BET_PLACED, payload, steps[at - 1].at_ms, "late_bet"))


_ROUND_FAULTS = (
    ("void", _void),
    ("duplicate_card", _duplicate_card),
    ("bad_card", _bad_card),
    ("missing_cards", _missing_cards),
    ("wrong_call", _wrong_call),
    ("late_bet", _late_bet),
)


# ---------------------------------------------------------------- transport faults


def _swap_adjacent(messages: list[FeedMessage], rng: random.Random) -> list[FeedMessage]:
    i = rng.randrange(len(messages) - 1)
    out = list(messages)
    out[i], out[i + 1] = replace(messages[i + 1], fault="out_of_order"), messages[i]
    return out


def _redeliver(messages: list[FeedMessage], rng: random.Random) -> list[FeedMessage]:
    i = rng.randrange(len(messages))
    out = list(messages)
    out.insert(rng.randint(i + 1, len(messages)), replace(messages[i], fault="redelivery"))
    return out


def _tear(messages: list[FeedMessage], rng: random.Random) -> list[FeedMessage]:
    i = rng.randrange(len(messages))
    whole = messages[i]
    torn = replace(whole, body=whole.body[: len(whole.body) // 2], event=None, fault="malformed")
    return [*messages[:i], torn, *messages[i:]]
