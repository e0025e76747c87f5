"""Ed25519 signatures over the ledger's heads and publish marks (the ``cryptography`` library).

The service holds the private key (a PEM file named by ``CROUPIER_LEDGER_SIGNING_KEY``);
auditors hold only the public key. Every signed text starts with its own label, so a
signature over a head can never pass for one over a publish mark, and the reverse:

* a head:  ``croupier.ledger.head\\0<position>\\0<hash>``;
* a mark:  ``croupier.outbox.published\\0<canonical JSON array of message ids>``;
* a set-aside row: ``croupier.outbox.set_aside\\0<canonical JSON [message id, reason]>``.

Signatures and key ids are lowercase hex. A key id is the first 16 hex digits of the
SHA-256 of the raw public key: rows name the key that signed them, so a row signed with
another key is told apart from a damaged one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from contract.canonical import canonical_json

PRIVATE_KEY_FILE: Final = "ledger-signing.key"
PUBLIC_KEY_FILE: Final = "ledger-signing.pub"

_HEAD: Final = b"croupier.ledger.head\0"
#: A head that also claims how far the outbox was published (``published``).
_HEAD_CLAIM: Final = b"croupier.ledger.head.published\0"
_MARK: Final = b"croupier.outbox.published\0"
_ASIDE: Final = b"croupier.outbox.set_aside\0"


class SigningKeyError(ValueError):
    """A key file is missing, unreadable or not an Ed25519 key; the message says which."""


def head_text(position: int, digest: str, published: int | None = None) -> bytes:
    """The bytes a head signature covers (with its claim of the published outbox, if any)."""
    if published is None:
        return _HEAD + f"{position}\0{digest}".encode()
    return _HEAD_CLAIM + f"{position}\0{digest}\0{published}".encode()


def mark_text(message_ids: Sequence[str]) -> bytes:
    """The bytes a publish mark's signature covers."""
    return _MARK + canonical_json(list(message_ids)).encode()


def aside_text(message_id: str, reason: str) -> bytes:
    """The bytes a set-aside row's signature covers."""
    return _ASIDE + canonical_json([message_id, reason]).encode()


@dataclass(frozen=True)
class LedgerPublicKey:
    """What an auditor (or the relay) checks signatures with."""

    key: Ed25519PublicKey

    @property
    def key_id(self) -> str:
        raw = self.key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return hashlib.sha256(raw).hexdigest()[:16]

    def verify(self, text: bytes, signature: str | None) -> bool:
        """Whether ``signature`` (hex) is this key's signature over ``text``."""
        if not signature:
            return False
        try:
            self.key.verify(bytes.fromhex(signature), text)
        except (InvalidSignature, ValueError):
            return False
        return True

    def verify_head(
        self, position: int, digest: str, signature: str | None, published: int | None = None
    ) -> bool:
        return self.verify(head_text(position, digest, published), signature)

    def verify_mark(self, message_ids: Sequence[str], signature: str | None) -> bool:
        return self.verify(mark_text(message_ids), signature)

    def verify_aside(self, message_id: str, reason: str, signature: str | None) -> bool:
        return self.verify(aside_text(message_id, reason), signature)

    def pem(self) -> bytes:
        return self.key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def raw_hex(self) -> str:
        """The 32 raw bytes of the key, in hex (as keyrings and handovers carry it)."""
        raw = self.key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return raw.hex()

    @classmethod
    def from_hex(cls, text: str) -> LedgerPublicKey:
        """The key ``raw_hex`` wrote; ``ValueError`` for anything else."""
        raw = bytes.fromhex(text)
        if len(raw) != 32:
            raise ValueError(f"an Ed25519 public key is 32 bytes, not {len(raw)}")
        return cls(Ed25519PublicKey.from_public_bytes(raw))

    @classmethod
    def from_file(cls, path: str | Path) -> LedgerPublicKey:
        """Load a PEM public key (``croupier keygen`` writes one)."""
        try:
            key = serialization.load_pem_public_key(_read(path, "public key"))
        except ValueError as error:
            raise SigningKeyError(f"{path} is not a usable PEM public key ({error})") from error
        if not isinstance(key, Ed25519PublicKey):
            raise SigningKeyError(f"{path} is not an Ed25519 public key; make one with keygen")
        return cls(key)


@dataclass(frozen=True)
class LedgerKey:
    """The service's signing key."""

    key: Ed25519PrivateKey

    @property
    def public(self) -> LedgerPublicKey:
        return LedgerPublicKey(self.key.public_key())

    def sign(self, text: bytes) -> str:
        return self.key.sign(text).hex()

    def sign_head(self, position: int, digest: str, published: int | None = None) -> str:
        return self.sign(head_text(position, digest, published))

    def sign_mark(self, message_ids: Sequence[str]) -> str:
        return self.sign(mark_text(message_ids))

    def sign_aside(self, message_id: str, reason: str) -> str:
        return self.sign(aside_text(message_id, reason))

    @classmethod
    def generate(cls) -> LedgerKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_file(cls, path: str | Path) -> LedgerKey:
        """Load an unencrypted PKCS#8 PEM private key (``croupier keygen`` writes one)."""
        try:
            key = serialization.load_pem_private_key(_read(path, "signing key"), password=None)
        except (ValueError, TypeError) as error:
            raise SigningKeyError(f"{path} is not a usable PEM private key ({error})") from error
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"{path} is not an Ed25519 private key; make one with keygen")
        return cls(key)

    def write(self, folder: Path) -> tuple[Path, Path]:
        """Write the key pair into ``folder`` (private file mode 0600); never overwrites."""
        folder.mkdir(parents=True, exist_ok=True)
        private, public = folder / PRIVATE_KEY_FILE, folder / PUBLIC_KEY_FILE
        for path in (private, public):
            if path.exists():
                raise SigningKeyError(f"{path} exists; choose another --out or move it away")
        pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(pem)
        public.write_bytes(self.public.pem())
        return private, public


def _read(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise SigningKeyError(
            f"cannot read the {what} {path} ({error.strerror}); "
            "make a key pair with `croupier keygen --out DIR`"
        ) from error
