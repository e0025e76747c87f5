"""The security headers on every ``croupier web`` response, errors (500 included) too
(set by :class:`croupier.history.app.SecurityHeaders`).

Framing: the pages are meant to be framed by the operator's game client and by nothing
else. ``CROUPIER_WEB_FRAME_ANCESTORS`` lists the origins that may frame them (CSP source
expressions: ``https://casino.example``, ``https://*.casino.example``, ``'self'``). Unset,
no origin may: ``frame-ancestors 'none'`` and ``X-Frame-Options: DENY`` (for browsers
that predate CSP). ``X-Frame-Options`` cannot name origins, so with a list only the CSP
is sent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

#: A CSP source expression a frame-ancestors list may hold (no ``*`` alone: that is no policy).
_SOURCE: Final = re.compile(
    r"'self'"
    r"|[a-z][a-z0-9+.-]*:"  # a scheme: https:
    r"|(?:[a-z][a-z0-9+.-]*://)?(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::(?:[0-9]{1,5}|\*))?"
    r"(?:/[a-z0-9._~%/-]*)?",
    re.IGNORECASE,
)


def parse_frame_ancestors(text: str | None) -> tuple[str, ...]:
    """The origins in a space- or comma-separated list; ``ValueError`` names a bad one."""
    sources = tuple(s for s in re.split(r"[\s,]+", text or "") if s)
    for source in sources:
        if not _SOURCE.fullmatch(source):
            raise ValueError(
                f"{source[:80]!r} is not an origin that may frame the pages: use "
                "https://host[:port], https://*.host or 'self', separated by spaces"
            )
    return sources


def security_headers(frame_ancestors: Sequence[str] = ()) -> dict[str, str]:
    """The headers every response carries, with the framing policy of ``frame_ancestors``."""
    framing = " ".join(frame_ancestors) or "'none'"
    headers = {
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",  # page URLs carry the player's token
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": (
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
            f"base-uri 'none'; frame-ancestors {framing}"
        ),
    }
    if not frame_ancestors:
        headers["X-Frame-Options"] = "DENY"
    return headers
