"""Game history and round recall: what ``croupier web`` serves, read from the ledger.

- :mod:`~croupier.history.recall`: a round folded from its own ledger stream, cut to what
  a viewer may see;
- :mod:`~croupier.history.auth`: player tokens (JWT) and staff keys with roles;
- :mod:`~croupier.history.store`: the read-only store port, with PostgreSQL and SQLite
  adapters over the ledger and the rounds read model;
- :mod:`~croupier.history.app`: the HTTP API and the pages.
"""
