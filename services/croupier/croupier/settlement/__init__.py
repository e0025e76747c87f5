"""The write path: a feed message becomes ledger facts and wallet messages.

consumer (deliveries in batches) -> settler (one ledger transaction a batch) -> round (the
rules decide) with repository and meters -> facts, results and dead letters in the ledger
and its outbox -> relay (the outbox to the broker). service runs them live; replay runs a
recorded feed through the same settler.
"""
