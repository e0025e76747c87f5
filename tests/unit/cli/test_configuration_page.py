"""docs/configuration.md has a row for every variable the settings read."""

from __future__ import annotations

import re
from pathlib import Path

from croupier.config import Settings

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_every_setting_has_a_row() -> None:
    rows = "\n".join(re.findall(r"^\|.*\|$", PAGE.read_text(encoding="utf-8"), re.MULTILINE))
    listed = set(re.findall(r"`(CROUPIER_[A-Z_]+)`", rows))
    assert {f"CROUPIER_{name.upper()}" for name in Settings.model_fields} - listed == set()
