"""contract: the messages Croupier and the studio exchange, v1, with nothing else in them.

- :mod:`contract.feed`: the studio's feed events (docs/feed.md), read by
  :func:`~contract.feed.parse_event`.
- :mod:`contract.events`: the same events as msgspec structs, read by
  :func:`~contract.events.read_event` (what croupier settles: the same acceptance and
  refusals, a fraction of the cost).
- :mod:`contract.settlement`: the results sent to wallets, and replay's rejection lines.
- :mod:`contract.codes`: why a message is refused, every rejection code in the order checked.
- :mod:`contract.wallet`: the wallet's transaction log, which the studio writes and
  ``croupier reconcile`` reads.

The package depends on the rules core (:mod:`holdem`) only; croupier and the studio both
depend on it and never on each other. ``make contracts`` writes its JSON Schemas to
``contracts/``.
"""
