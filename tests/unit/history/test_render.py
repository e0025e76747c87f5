"""What the history pages say, in the player's words: cards as ranks and suits, money with its
currency, each timeline fact as a sentence; never a raw card code or minor units."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from croupier.history.models import Cards, RoundRecall, Timeline, Total
from croupier.history.render import clock, money, outcome, refunds, timeline

HEART, CLUB, SPADE = "\N{BLACK HEART SUIT}", "\N{BLACK CLUB SUIT}", "\N{BLACK SPADE SUIT}"


def fact(fact: str = "feed.accepted", **fields: Any) -> Timeline:
    return Timeline(fact=fact, summary=fields.pop("summary", "as recorded"), **fields)


def round_of(*entries: Timeline, **fields: Any) -> RoundRecall:
    base: dict[str, Any] = {
        "table_id": "t",
        "round_id": "r",
        "game": "texas_holdem_plus",
        "paytable": None,
        "status": "settled",
        "opened_at": None,
        "closed_at": None,
        "closed_position": None,
        "void_reason": None,
        "cards": Cards(dealer=[], board=[], burns=[], boxes=[]),
        "wagers": [],
        "decisions": [],
        "results": [],
        "totals": [],
        "jackpot": [],
        "postings": [],
        "timeline": list(entries),
        "verification": None,
    }
    return RoundRecall(**(base | fields))


def said(round_: RoundRecall, staff: bool = False) -> list[str]:
    """The lines as text, the cards' markup reduced to what they show."""
    return [html.unescape(re.sub(r"<[^>]+>", "", text)) for _, text in timeline(round_, staff)]


def test_a_players_timeline_reads_as_sentences_with_cards_and_currency() -> None:
    entries = [
        fact(event_type="round.opened"),
        fact(event_type="bet.placed", spot="aa_bonus", amount=100, currency="EUR", box="main"),
        fact(event_type="cards.dealt", target="player", cards=["9h", "Tc"], box="main"),
        fact(event_type="cards.dealt", target="burn", cards=["2s"]),
        fact(event_type="decision.made", stage="preflop", action="call", amount=200,
             currency="EUR", box="main"),
        fact(event_type="cards.dealt", target="board", cards=["Ah", "Kc", "7s"]),
        fact(event_type="decision.made", stage="flop", action="check", box="main"),
        fact(event_type="cards.dealt", target="board", cards=["4c"]),
        fact(event_type="cards.dealt", target="board", cards=["3h"]),
        fact(event_type="cards.dealt", target="dealer", cards=["As", "Ac"]),
        fact("round.settled", event_type="round.completed"),
    ]  # fmt: skip
    assert said(round_of(*entries)) == [
        "Round opened: Texas Hold'em Plus",
        "AA Bonus bet: 1.00 EUR",
        f"Your cards: 9{HEART} 10{CLUB}",
        f"Burn card: 2{SPADE}",
        "Before the flop: you called 2.00 EUR",
        f"Flop: A{HEART} K{CLUB} 7{SPADE}",
        "Flop: you checked",
        f"Turn: 4{CLUB}",
        f"River: 3{HEART}",
        f"Dealer's cards: A{SPADE} A{CLUB}",
        "Round settled: every bet paid as shown above",
    ]


def test_staff_see_whose_wager_and_box_each_line_is_about() -> None:
    entries = [
        fact(event_type="bet.placed", spot="ante", amount=500, currency="JPY", box="2",
             player_id="p7"),
        fact(event_type="cards.dealt", target="player", cards=["Qd", "Jd"], box="2"),
        fact(event_type="decision.made", stage="flop", action="fold", box="2", player_id="p7"),
        fact("feed.rejected", event_type="decision.made", code="wrong_wager_size"),
        fact("feed.held", event_type="bet.placed"),
        fact("feed.rejected", summary="a message the feed contract refused"),
    ]  # fmt: skip
    assert said(round_of(*entries), staff=True) == [
        "p7, Ante bet (box 2): 500 JPY",
        "Box 2: Q\N{BLACK DIAMOND SUIT} J\N{BLACK DIAMOND SUIT}",
        "Flop: p7 (box 2) folded",
        "Refused: a decision",
        "Held: a bet",
        "a message the feed contract refused",
    ]


def test_a_voided_round_says_why_and_what_came_back() -> None:
    voided = round_of(
        fact("round.voided", event_type="round.voided"),
        status="voided",
        void_reason="misdeal",
        totals=[Total(player_id="p1", currency="EUR", stake=300, returned=300, net=0)],
    )
    assert said(voided) == ["Round voided: misdeal. Every wager refunded"]
    assert refunds(voided) == ["3.00 EUR"]
    two = voided.model_copy(
        update={
            "totals": [
                *voided.totals,
                Total(player_id="p2", currency="GBP", stake=150_000, returned=150_000, net=0),
            ]
        }
    )
    assert refunds(two) == ["p1: 3.00 EUR", "p2: 1,500.00 GBP"]


@pytest.mark.parametrize(
    ("why", "spot", "shown"),
    [
        ("Ante won: Flush pays 2 to 1", "ante", "Won: Flush pays 2 to 1"),
        ("AA Bonus lost", "aa_bonus", "Lost"),
        ("Ante push, stake returned", "ante", "Push, stake returned"),
        ("something else", "ante", "something else"),
    ],
)  # fmt: skip
def test_a_results_why_under_its_bet_leaves_out_the_bets_name(
    why: str, spot: str, shown: str
) -> None:
    assert outcome(why, spot) == shown


def test_times_and_amounts() -> None:
    assert clock("2026-12-04T12:34:56.789Z") == "12:34:56" and clock(None) == ""
    assert money(100_000, "EUR") == "1,000.00 EUR" and money(1234, "KWD") == "1.234 KWD"
