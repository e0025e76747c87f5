"""How the ledger encodes a fact's data: its canonical JSON text (``contract.canonical``).

Data that is :class:`contract.canonical.Encoded` itself (a Round's fact) is its text; a
top-level value that is (a feed event the Round fingerprinted, say) is spliced in as the
text it carries rather than encoded a second time; the result is byte for byte
``canonical_json(data)``. Guarded by
`python -m bench replay` (settlement into either ledger).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.canonical import Encoded, canonical_json, quote


def data_text(data: Mapping[str, Any]) -> str:
    """The canonical JSON text of ``data``, splicing the texts of its encoded values."""
    if type(data) is Encoded:  # encoded whole (a Round's fact)
        return data.text
    if not any(type(value) is Encoded for value in data.values()):
        return canonical_json(data)
    members = []
    for key in sorted(data):  # the order of sort_keys: str comparison
        value = data[key]
        kind = type(value)
        if kind is Encoded:
            text = value.text
        elif kind is str:  # a fingerprint, a reason: quoted directly
            text = quote(value)
        else:
            text = canonical_json(value)
        members.append(f"{quote(key)}:{text}")
    return "{" + ",".join(members) + "}"
