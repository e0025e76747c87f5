"""Sub-commands of the ``croupier`` program that compose croupier and the studio."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from croupier.errors import CommandError
from studio.config import ConfigError


@contextmanager
def studio_options(command: str) -> Iterator[None]:
    """Turn a studio the options describe that cannot play into a usage error of ``command``."""
    try:
        yield
    except ConfigError as error:
        raise CommandError(str(error), f"see `{command} --help`") from error
