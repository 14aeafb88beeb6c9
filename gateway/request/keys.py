"""Tenant API keys: `fg-` + 40 random alphanumerics, shown once; stored as SHA-256 + prefix.

A fast hash is enough here because the keys are long random secrets (no dictionary to guess
from), and it keeps the per-request lookup cheap.
"""

from __future__ import annotations

import hashlib
import secrets
import string

ALPHABET = string.ascii_letters + string.digits
PREFIX_LEN = 11  # "fg-" + 8 characters: enough to tell keys apart in lists and audit rows


def generate_key() -> tuple[str, str, str]:
    """Return (full key, visible prefix, hash)."""
    key = "fg-" + "".join(secrets.choice(ALPHABET) for _ in range(40))
    return key, key[:PREFIX_LEN], hash_key(key)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
