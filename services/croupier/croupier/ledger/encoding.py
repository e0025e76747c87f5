"""How the ledger encodes a fact's data: its canonical JSON text (``contract.canonical``).

A top-level value that is :class:`contract.canonical.Encoded` (a feed event the Round
fingerprinted, say) is spliced in as the text it carries rather than encoded a second
time; the result is byte for byte ``canonical_json(data)``. Guarded by
`python -m bench replay` (settlement into either ledger).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.canonical import Encoded, canonical_json, quote


def data_text(data: Mapping[str, Any]) -> str:
    """The canonical JSON text of ``data``, splicing the texts of its encoded values."""
    spliced = [key for key, value in data.items() if type(value) is Encoded]
    if not spliced:
        return canonical_json(data)
    if len(spliced) == 1:  # a fact about a feed event: the one shape on the hot path
        key = spliced[0]
        before = {k: v for k, v in data.items() if k < key}
        after = {k: v for k, v in data.items() if k > key}
        head = _members(before) + "," if before else ""
        tail = "," + _members(after) if after else ""
        return f"{{{head}{quote(key)}:{data[key].text}{tail}}}"
    parts: list[str] = []
    plain: dict[str, Any] = {}
    for key in sorted(data):
        value = data[key]
        if type(value) is Encoded:
            if plain:
                parts.append(canonical_json(plain)[1:-1])
                plain = {}
            parts.append(f"{quote(key)}:{value.text}")
        else:
            plain[key] = value
    if plain:
        parts.append(canonical_json(plain)[1:-1])
    return "{" + ",".join(parts) + "}"


def _members(plain: dict[str, Any]) -> str:
    """The members of a JSON object, canonical, without the braces; string values (the
    fingerprint beside an event, say) quoted directly rather than through the encoder."""
    if len(plain) == 1:
        ((key, value),) = plain.items()
        if type(value) is str:
            return f"{quote(key)}:{quote(value)}"
    return canonical_json(plain)[1:-1]
