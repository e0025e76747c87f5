"""studio: a live casino studio simulator that plays tables and emits the feed.

Deterministic from a seed; both games on every pay table; shared live hands or boxes;
simulated players with a :class:`~studio.strategy.Strategy`; faults on request. The feed
is valid against :mod:`contract.feed` and goes to JSONL (:func:`write_jsonl`) or to
RabbitMQ (:func:`studio.publisher.publish`). The simulator depends on the rules core and
the contract package only, never on croupier, so it stays an independent
producer that settlement can be checked against.
"""

from studio.config import ConfigError, Faults, StudioConfig, TableSpec, every_paytable
from studio.feed import FeedMessage, FeedTally, simulate, write_jsonl
from studio.strategy import (
    AlwaysCall,
    BestPlayStrategy,
    SimpleStrategy,
    Strategy,
    TimeoutStrategy,
    register_strategy,
)

__all__ = [
    "AlwaysCall",
    "BestPlayStrategy",
    "ConfigError",
    "Faults",
    "FeedMessage",
    "FeedTally",
    "SimpleStrategy",
    "Strategy",
    "StudioConfig",
    "TableSpec",
    "TimeoutStrategy",
    "every_paytable",
    "register_strategy",
    "simulate",
    "write_jsonl",
]
