"""floor: the studio and the back office playing together, the one place that knows both.

Croupier (:mod:`croupier`) settles a feed and the studio (:mod:`studio`) produces one; each
speaks only the contract (:mod:`contract`) and neither imports the other. The floor composes
them: ``croupier demo`` (:mod:`floor.demo`: the live service, a studio and a wallet, side by
side), ``croupier simulate`` (the studio's feed with croupier's console), and the
``croupier`` program itself (:mod:`floor.cli`: croupier's commands and these two).
"""
