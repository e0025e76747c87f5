"""Configuration: ``CROUPIER_*`` environment variables (or a ``.env`` file in the working
directory), validated once at start.

========================  ==============================================  ==============
variable                  what                                            default
========================  ==============================================  ==============
CROUPIER_DATABASE_URL     the ledger (every command's ``--ledger``)       local PostgreSQL
CROUPIER_AMQP_URL         the broker                                      local RabbitMQ
CROUPIER_HTTP_PORT        ``/metrics``, ``/healthz``, ``/readyz``         9464
CROUPIER_LOG_LEVEL        DEBUG, INFO, WARNING, ERROR or CRITICAL         INFO (serve),
                                                                          WARNING (others)
CROUPIER_MAX_BATCH        feed messages per ledger transaction (serve)    1000
CROUPIER_WEB_PORT         ``croupier web``: history API and pages         8470
CROUPIER_PLAYER_TOKEN_    HS256 secret of players' JWTs (web)             none
  SECRET
CROUPIER_PLAYER_TOKEN_    the operator's PEM public key (or a file) for   none
  PUBLIC_KEY              players' RS256/ES256/EdDSA JWTs (web)
CROUPIER_STAFF_KEYS       staff keys and roles, JSON text or a file (web) none
CROUPIER_WEB_TOKEN_       the ``iss`` and ``aud`` players' JWTs must      none (not
  ISSUER, _AUDIENCE       carry (web; both optional)                      checked)
CROUPIER_WEB_FRAME_       origins that may frame the pages, e.g.          none: no
  ANCESTORS               ``https://casino.example`` (web)                framing
CROUPIER_WEB_SESSION_     HMAC secret of staff session cookies, at least  made at start
  SECRET                  32 bytes (web)
CROUPIER_STAFF_SSO_       the operator's SSO PEM public key (or a file):  none
  PUBLIC_KEY              staff may sign in with its tokens (web)
CROUPIER_STAFF_SSO_       the ``aud`` the SSO tokens carry (web)          croupier-staff
  AUDIENCE
CROUPIER_HELD_TIMEOUT     seconds an event waits for a seq gap to fill,   300
                          then it is rejected (held_timeout)
CROUPIER_ROUND_TIMEOUT    seconds a round stays open before Croupier      3600
                          voids it, refunding every wager (round_timeout)
CROUPIER_RELAY_LEASE      seconds until a standby takes over relaying     10
                          from an instance that stopped renewing
CROUPIER_PARTITIONED      1: serve takes a share of the ledger's          0: one
                          partitions and consumes their queues only       instance
                          (the routed feed, docs/scale.md)                settles all
CROUPIER_PARTITION_TERM   seconds a partition lease lasts unrenewed       10
CROUPIER_LEDGER_SIGNING_  the ledger's Ed25519 signing key file           none
  KEY                     (croupier keygen); serve needs it
CROUPIER_LEDGER_KEYRING   the keyring file of every key that signed the   the signing
                          ledger (croupier rotate-key; docs/keys.md)      key alone
========================  ==============================================  ==============

Sizes are fixed, not configured (docs/feed.md, "Message sizes and memory"): a feed message
is at most 16 KiB (a bigger one is kept as its first 16 KiB with its size and SHA-256 and
rejected ``too_large``); ``serve`` takes at most 2,000 deliveries (the prefetch), so
32 MiB of bodies, a batch at most 2 MiB of them whatever ``CROUPIER_MAX_BATCH`` says, and
it stays under 400 MB resident; the broker refuses messages over 1 MiB
(deploy/rabbitmq/croupier.conf).

The environment wins over ``.env``. An invalid value is a configuration error (exit 2) named
by its variable, never a traceback.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from croupier.errors import CommandError
from croupier.history.headers import parse_frame_ancestors
from croupier.urls import check_amqp_url, mask_secrets, parse_ledger_url

DEFAULT_DATABASE_URL: Final = "postgresql://postgres@127.0.0.1:5432/croupier"
DEFAULT_AMQP_URL: Final = "amqp://guest:guest@127.0.0.1:5672/"
DEFAULT_HTTP_PORT: Final = 9464
DEFAULT_WEB_PORT: Final = 8470
MAX_BATCH_LIMIT: Final = 10_000
#: The longest term a Croupier instance takes the relay lease for (seconds); the ledger
#: treats a longer lease as written by no Croupier (:mod:`croupier.ledger`).
LEASE_LIMIT: Final = 600.0
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _ledger_url(url: str) -> str:
    parse_ledger_url(url)
    return url


def _frame_ancestors(value: str | None) -> str | None:
    parse_frame_ancestors(value)
    return value


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


class Settings(BaseSettings):
    """Where Croupier finds its ledger and broker, where it serves HTTP, how it logs."""

    model_config = SettingsConfigDict(
        env_prefix="CROUPIER_", env_file=".env", extra="ignore", frozen=True
    )

    database_url: Annotated[str, AfterValidator(_ledger_url)] = Field(
        DEFAULT_DATABASE_URL, description="the ledger: postgresql://... or sqlite:///FILE"
    )
    amqp_url: Annotated[str, AfterValidator(check_amqp_url)] = Field(
        DEFAULT_AMQP_URL, description="the broker: amqp://USER:PASSWORD@HOST:PORT/VHOST"
    )
    http_port: int = Field(
        DEFAULT_HTTP_PORT, ge=0, le=65535, description="probes and metrics (0: any free port)"
    )
    log_level: Annotated[LogLevel | None, BeforeValidator(_upper)] = Field(
        None, description="DEBUG, INFO, WARNING, ERROR or CRITICAL (serve: INFO, others: WARNING)"
    )
    max_batch: int = Field(
        1000, ge=1, le=MAX_BATCH_LIMIT, description="feed messages per ledger transaction"
    )
    held_timeout: float = Field(
        300.0, gt=0, le=7 * 86400, description="seconds an event waits for a seq gap to fill"
    )
    round_timeout: float = Field(
        3600.0, gt=0, le=30 * 86400, description="seconds a round stays open till Croupier voids it"
    )
    relay_lease: float = Field(
        10.0, ge=1, le=LEASE_LIMIT, description="seconds until a standby takes over the relay"
    )
    partitioned: bool = Field(
        False, description="serve takes a share of the partitions and consumes their queues only"
    )
    partition_term: float = Field(
        10.0, ge=1, le=LEASE_LIMIT, description="seconds a partition lease lasts unrenewed"
    )
    ledger_signing_key: str | None = Field(
        None, description="the ledger's Ed25519 signing key file (croupier keygen); serve needs it"
    )
    ledger_keyring: str | None = Field(
        None,
        description="after a key rotation: the keyring file (croupier rotate-key) of every "
        "key that signed this ledger",
    )

    web_port: int = Field(
        DEFAULT_WEB_PORT, ge=0, le=65535, description="croupier web: history API and pages"
    )
    player_token_secret: SecretStr | None = Field(
        None, description="HS256 secret of players' JWTs, at least 32 bytes (web)"
    )
    player_token_public_key: str | None = Field(
        None, description="the operator's PEM public key, or its file, for players' JWTs (web)"
    )
    staff_keys: str | None = Field(
        None, description="staff keys (SHA-256) and roles: JSON text or a file (web)"
    )

    web_token_issuer: str | None = Field(
        None, description="the iss players' JWTs must carry (web; unset: not checked)"
    )
    web_token_audience: str | None = Field(
        None, description="the aud players' JWTs must carry (web; unset: not checked)"
    )
    web_frame_ancestors: Annotated[str | None, AfterValidator(_frame_ancestors)] = Field(
        None, description="origins that may frame the pages, space-separated (web; unset: none)"
    )
    web_session_secret: SecretStr | None = Field(
        None, description="HMAC secret of staff session cookies, at least 32 bytes (web)"
    )
    staff_sso_public_key: str | None = Field(
        None, description="the operator's SSO PEM public key, or its file: staff sign-on (web)"
    )
    staff_sso_audience: str = Field(
        "croupier-staff", description="the aud the operator's staff SSO tokens carry (web)"
    )

    @property
    def database_configured(self) -> bool:
        """Whether the ledger URL was given (environment or ``.env``), not defaulted."""
        return "database_url" in self.model_fields_set

    @property
    def amqp_configured(self) -> bool:
        """Whether the broker URL was given (environment or ``.env``), not defaulted."""
        return "amqp_url" in self.model_fields_set


def load_settings() -> Settings:
    """Read and validate the settings; a :class:`CommandError` names the bad variable."""
    try:
        return Settings()
    except ValidationError as error:
        raise CommandError(_explain(error), "fix the environment or .env") from None


def _explain(error: ValidationError) -> str:
    problems = []
    for problem in error.errors():
        name = f"CROUPIER_{str(problem['loc'][0]).upper()}" if problem["loc"] else "settings"
        message = str(problem["msg"]).removeprefix("Value error, ")
        problems.append(f"{name}={mask_secrets(str(problem['input']))!r}: {message}")
    return "; ".join(problems)


_current: Settings | None = None


def settings() -> Settings:
    """The settings ``croupier`` read at start; outside a command, read afresh each call."""
    return _current if _current is not None else load_settings()


def use_settings(chosen: Settings | None) -> None:
    """Make ``chosen`` the settings of this process (None: read them on every use)."""
    global _current
    _current = chosen


def help_table() -> str:
    """Every variable with its default and meaning, for ``croupier --help``."""
    lines = []
    for name, field in Settings.model_fields.items():
        text = f"  CROUPIER_{name.upper():<14} {field.description}"
        if field.default is not None:
            text += f" (default {mask_secrets(str(field.default))})"
        lines.append(text)
    return "\n".join(lines)
