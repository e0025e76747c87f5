"""Rounds for the history tests, settled through the real settler into a ledger.

- ``shared``: Casino Hold'em (classic), one shared hand played by p1 (ante, AA bonus, call)
  and p2 (ante, a call of the wrong size that is rejected, then a fold); p1's Flush of
  hearts beats the dealer's pair of Kings.
- ``boxes``: Texas Hold'em Plus, three boxes: p1 on boxes 1 and 3, p3 on box 2 (folds);
  box 3 makes a Royal Flush.
- ``jackpot``: Casino Hold'em (progressive), p4 and p5 with jackpot bets on one hand.
- ``voided``: Casino Hold'em, p1's ante refunded.
"""

from __future__ import annotations

from collections.abc import Sequence

from croupier_feeds import CH_CLASSIC, CH_PROGRESSIVE, THP, RoundFeed, line

from croupier.ledger import Ledger
from croupier.settlement.settler import Inbound, Settler

TABLE_CH = "ch-1"
TABLE_THP = "thp-1"
TABLE_JACKPOT = "ch-jp"


def shared_round(round_id: str = "r-shared") -> RoundFeed:
    feed = RoundFeed(TABLE_CH, round_id)
    feed.opened(CH_CLASSIC)
    feed.bet("a1", "ante", 100, player="p1")
    feed.bet("b1", "aa_bonus", 100, player="p1")
    feed.bet("a2", "ante", 200, player="p2")
    feed.cards("burn", "4c")
    feed.hole("Qh Th")
    feed.cards("dealer", "As Kd")
    feed.cards("board", "2h 7h 9h")
    feed.decide("a1", "flop", "call", "c1", 200)
    feed.decide("a2", "flop", "call", "c2", 300)  # not 2x the ante: rejected
    feed.decide("a2", "flop", "fold")
    feed.cards("board", "Kc 3d")
    feed.completed()
    return feed


def boxes_round(round_id: str = "r-boxes") -> RoundFeed:
    feed = RoundFeed(TABLE_THP, round_id)
    feed.opened(THP)
    feed.bet("a1", "ante", 100, player="p1", box="1")
    feed.bet("a3", "ante", 100, player="p3", box="2")
    feed.bet("a4", "ante", 100, player="p1", box="3")
    feed.hole("As Ad", box="1")
    feed.hole("7c 2d", box="2")
    feed.hole("Kh Qh", box="3")
    feed.decide("a1", "preflop", "call", "c1", 200)
    feed.decide("a3", "preflop", "fold")
    feed.decide("a4", "preflop", "call", "c4", 200)
    feed.cards("board", "Ah Jh Th")
    feed.decide("a1", "flop", "check")
    feed.decide("a4", "flop", "bet", "f4", 100)
    feed.cards("board", "4s")
    feed.cards("board", "3c")
    feed.cards("dealer", "9s 9c")
    feed.completed()
    return feed


def jackpot_round(round_id: str = "r-jackpot") -> RoundFeed:
    """Casino Hold'em (progressive): p4 and p5 share a hand and each stake the jackpot;
    the flop makes a Flush, which pays the jackpot bet 50 to 1 (a fixed line, not the meter).
    """
    feed = RoundFeed(TABLE_JACKPOT, round_id)
    feed.opened(CH_PROGRESSIVE)
    for player, ante in (("p4", "a4"), ("p5", "a5")):
        feed.bet(ante, "ante", 100, player=player)
        feed.bet(f"j{ante[1]}", "jackpot", 100, player=player)
    feed.hole("Qh Th")
    feed.cards("dealer", "As Kd")
    feed.cards("board", "2h 7h 9h")
    feed.decide("a4", "flop", "call", "c4", 200)
    feed.decide("a5", "flop", "fold")
    feed.cards("board", "Kc 3d")
    feed.completed()
    return feed


def voided_round(round_id: str = "r-void") -> RoundFeed:
    feed = RoundFeed(TABLE_CH, round_id)
    feed.opened(CH_CLASSIC)
    feed.bet("a1", "ante", 300, player="p1")
    feed.voided("misdeal")
    return feed


def simple_round(table_id: str, round_id: str, player: str, ante: int = 100) -> RoundFeed:
    """A Casino Hold'em round of one player who calls (for pagination tests)."""
    feed = RoundFeed(table_id, round_id)
    feed.opened(CH_CLASSIC)
    feed.bet("a1", "ante", ante, player=player)
    feed.hole("2c 7d")
    feed.cards("dealer", "Ks Qd")
    feed.cards("board", "3h 8s Jc")
    feed.decide("a1", "flop", "call", "c1", 2 * ante)
    feed.cards("board", "4d 9h")
    feed.completed()
    return feed


async def settle(ledger: Ledger, feeds: Sequence[RoundFeed]) -> None:
    """Settle the rounds through the settler, one batch per round."""
    settler = Settler(ledger)
    for feed in feeds:
        batch = [Inbound(line(e).encode(), i) for i, e in enumerate(feed.events)]
        await settler.handle(batch)
