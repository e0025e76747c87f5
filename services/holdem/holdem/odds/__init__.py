"""Exact odds of Casino Hold'em and Texas Hold'em Plus, by full enumeration.

- :mod:`holdem.odds.situation`: the EV of each action at one decision, with outcome counts.
- :mod:`holdem.odds.engine`: every hole pair of one flop at once (the PAR computation's core).
- :mod:`holdem.odds.par`: PAR sheets of pay tables, and the stored PAR data.
- :mod:`holdem.odds.sidebets`: AA bonus, jackpot and PLUS in closed form.
- :mod:`holdem.odds.report`: PAR sheets as text tables, Markdown and JSON figures.
"""

from holdem.odds.par import (
    ParDataError,
    compute_par,
    load_par,
    texas_holdem_plus_preflop,
)
from holdem.odds.sheet import BetSheet, DecisionSheet, Line, ParSheet
from holdem.odds.situation import (
    CasinoHoldemFlopOdds,
    ThpDecisionOdds,
    casino_holdem_flop,
    texas_holdem_plus_flop,
    texas_holdem_plus_turn,
)

__all__ = [
    "BetSheet",
    "CasinoHoldemFlopOdds",
    "DecisionSheet",
    "Line",
    "ParDataError",
    "ParSheet",
    "ThpDecisionOdds",
    "casino_holdem_flop",
    "compute_par",
    "load_par",
    "texas_holdem_plus_flop",
    "texas_holdem_plus_preflop",
    "texas_holdem_plus_turn",
]
