"""The framing policy: which origins may frame the pages, from CROUPIER_WEB_FRAME_ANCESTORS."""

from __future__ import annotations

import pytest

from croupier.config import load_settings
from croupier.errors import CommandError
from croupier.history.headers import parse_frame_ancestors, security_headers


def test_by_default_no_origin_may_frame_the_pages() -> None:
    headers = security_headers(parse_frame_ancestors(None))
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"


def test_a_list_of_origins_is_the_csp_frame_ancestors_and_no_x_frame_options() -> None:
    origins = parse_frame_ancestors("https://casino.example, https://*.games.example:8443 'self'")
    headers = security_headers(origins)
    policy = headers["Content-Security-Policy"]
    assert policy.endswith(
        "frame-ancestors https://casino.example https://*.games.example:8443 'self'"
    )
    assert "X-Frame-Options" not in headers  # it cannot name origins


@pytest.mark.parametrize(
    "value",
    [
        "*",
        "https://a.example; script-src *",  # would add a directive
        "https://a.example\r\nSet-Cookie: x=1",
        "'unsafe-inline'",
        "https://a.example/'",
        "javascript:alert(1)//x",
    ],
)
def test_anything_but_origins_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="not an origin"):
        parse_frame_ancestors(value)


def test_a_bad_setting_is_a_configuration_error_named_by_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CROUPIER_WEB_FRAME_ANCESTORS", "https://a.example; x")
    with pytest.raises(CommandError, match="CROUPIER_WEB_FRAME_ANCESTORS"):
        load_settings()
