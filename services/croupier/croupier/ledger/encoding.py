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
    if not any(type(value) is Encoded for value in data.values()):
        return canonical_json(data)
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
