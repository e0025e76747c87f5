"""Canonical JSON: the one text of a JSON value, keys sorted, no whitespace, no NaN.

Two feed events are the same event when their canonical texts are equal (croupier records
a digest of it as the event's fingerprint), and the ledger stores and hashes data as this
text. :class:`Encoded` carries a JSON object together with its canonical text, so a writer
that embeds the object in a larger value can splice the text in instead of encoding the
object again.

:meth:`Encoded.plain` writes the canonical text with msgspec (sorted keys, the same
escapes): several times faster than the ``json`` module, and byte for byte
``canonical_json`` of the same value (held to it by property tests) for values without a
float (msgspec writes floats differently); a string msgspec cannot write (a lone surrogate)
goes the ``json`` way instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Self

import msgspec

_canonical_encoder = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
)
#: A str as a JSON string literal (ensure_ascii=False); the C function where available.
quote: Callable[[str], str] = json.encoder.encode_basestring
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
# Built once: JSONEncoder.encode builds a fresh C encoder per call, which dominates the
# cost of encoding small payloads. Guarded by `python -m bench ledger` and `bench replay`.
_iterencode: Callable[[Any, int], list[str]] | None = (
    None
    if _make_encoder is None
    else _make_encoder(None, _canonical_encoder.default, quote, None, ":", ",", True, False, False)
)


def canonical_json(value: Any) -> str:
    """Deterministic JSON text: sorted keys, no whitespace, no NaN/Infinity."""
    if _iterencode is None or isinstance(value, str | int | float | bool | None):
        return _canonical_encoder.encode(value)
    return "".join(_iterencode(value, 0))


_write_sorted = msgspec.json.Encoder(order="sorted").encode
_read = msgspec.json.Decoder().decode


def read_json(text: str) -> Any:
    """``json.loads(text)``, by msgspec (several times faster) for what it reads alike:
    JSON text that the ``json`` module reads to the same value. What msgspec refuses and
    the ``json`` module takes (a number beyond a float, NaN, a lone surrogate escape) is
    read by the ``json`` module, so the value is always ``json.loads``'."""
    try:
        return _read(text)
    except msgspec.DecodeError:
        return json.loads(text)


class Encoded(dict[str, Any]):
    """A JSON object and its canonical text, encoded once; never changed after."""

    __slots__ = ("text",)

    def __init__(self, value: Mapping[str, Any]) -> None:
        super().__init__(value)
        self.text = canonical_json(value)

    @classmethod
    def plain(cls, value: Mapping[str, Any]) -> Self:
        """``Encoded(value)`` for a value that holds no float (msgspec writes those
        otherwise): strings, integers, booleans, None, lists and str-keyed dicts. The
        texts of its top-level ``Encoded`` values are spliced in, not encoded again."""
        spliced = {
            key: msgspec.Raw(member.text.encode()) if type(member) is Encoded else member
            for key, member in value.items()
        }
        try:
            canonical = _write_sorted(spliced).decode()
        except UnicodeEncodeError:  # a lone surrogate: written the json way
            return cls(value)
        encoded = cls.__new__(cls)
        dict.update(encoded, value)
        encoded.text = canonical
        return encoded

    @classmethod
    def with_text(cls, value: dict[str, Any], text: str) -> Self:
        """``value`` with ``text``, which its writer vouches is ``canonical_json(value)``."""
        encoded = cls.__new__(cls)
        dict.update(encoded, value)
        encoded.text = text
        return encoded
