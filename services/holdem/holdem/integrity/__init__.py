"""Decision-adjusted RTP statistics: the deal value and the play residual of every round.

- :mod:`holdem.integrity.tables`: exact decision tables of a flop, shared up to suits.
- :mod:`holdem.integrity.constants`: the deal value's exact mean and covariance per pay table.
- :mod:`holdem.integrity.terms`: one round's terms, and their sums over rounds.
"""
