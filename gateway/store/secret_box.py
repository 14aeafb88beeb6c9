"""Upstream secrets at rest: backend and pool API keys (and a backend's proxy URL and extra
headers) are Fernet tokens in the database.

The key comes from `FAIRGATE_SECRETS_KEY` (or the first line of `FAIRGATE_SECRETS_KEY_FILE`);
several keys, comma-separated, rotate: the first encrypts, every one decrypts. The columns are
`SecretText`: the ORM encrypts on write and decrypts on read, so the rest of the gateway sees
plain keys and the database never does. The box rides on the engine's dialect (`make_engine`),
so no module holds it.

Without a key the gateway runs as long as no secret is stored: it refuses to start over a
database that holds one (`check_readable`), and an admin call that would store one is a 400
naming `api_key`. Migration 0007 encrypts keys stored in plaintext by older versions.

    python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import Text, TypeDecorator

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from fairgate.gateway.settings import Settings

PREFIX = "fernet:"
SECRET_COLUMNS = (("backends", "api_key"), ("backend_pools", "api_key"), ("pool_replicas", "api_key"),
                  ("backends", "proxy_url"), ("backends", "extra_headers"))
MISSING = ("upstream API keys are stored encrypted: set FAIRGATE_SECRETS_KEY (or FAIRGATE_SECRETS_KEY_FILE) "
           "to a Fernet key")


class SecretsKeyMissing(RuntimeError):
    """A secret must be written or read and no secrets key is configured (or it is the wrong one)."""


class SecretBox:
    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise ValueError("SecretBox needs at least one key")
        try:
            self._fernet = MultiFernet([Fernet(k.strip().encode()) for k in keys])
        except ValueError as exc:  # not 32 url-safe base64 bytes
            raise ValueError(f"FAIRGATE_SECRETS_KEY is not a Fernet key ({exc})") from None

    def encrypt(self, plain: str) -> str:
        return PREFIX + self._fernet.encrypt(plain.encode()).decode()

    def decrypt(self, stored: str) -> str:
        if not stored.startswith(PREFIX):
            raise SecretsKeyMissing("a stored upstream key is not encrypted; run `fairgate db upgrade`")
        try:
            return self._fernet.decrypt(stored[len(PREFIX):].encode()).decode()
        except InvalidToken:
            raise SecretsKeyMissing("a stored upstream key does not decrypt with FAIRGATE_SECRETS_KEY "
                                    "(the wrong key, or one rotated out)") from None


def box_from_settings(settings: Settings) -> SecretBox | None:
    raw = settings.secrets_key
    if not raw and settings.secrets_key_file:
        lines = Path(settings.secrets_key_file).read_text().splitlines()
        raw = lines[0] if lines else ""
    keys = [k for k in (raw or "").split(",") if k.strip()]
    return SecretBox(keys) if keys else None


def attach(engine: Engine, box: SecretBox | None) -> None:
    """Make `SecretText` columns of this engine use `box`."""
    engine.dialect.fairgate_secret_box = box  # type: ignore[attr-defined]


def _box(dialect: Any) -> SecretBox:
    box: SecretBox | None = getattr(dialect, "fairgate_secret_box", None)
    if box is None:
        raise SecretsKeyMissing(MISSING)
    return box


class SecretText(TypeDecorator[str]):
    """A Text column holding `fernet:<token>`; plain text only on the Python side."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else _box(dialect).encrypt(value)

    def process_result_value(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else _box(dialect).decrypt(value)


class SecretJSON(TypeDecorator[Any]):
    """A JSON value (a backend's extra headers) stored encrypted, as `SecretText` stores a string."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        return None if value is None else _box(dialect).encrypt(json.dumps(value, sort_keys=True))

    def process_result_value(self, value: str | None, dialect: Any) -> Any:
        return None if value is None else json.loads(_box(dialect).decrypt(value))


def stored_secrets(engine: Engine) -> int:
    """How many secrets the database holds (raw column reads, nothing decrypted)."""
    from sqlalchemy import inspect, text

    insp = inspect(engine)
    names = set(insp.get_table_names())
    total = 0
    with engine.connect() as conn:
        for table, column in SECRET_COLUMNS:
            if table in names and column in {c["name"] for c in insp.get_columns(table)}:  # before 0011
                total += conn.execute(text(f"SELECT COUNT(*) FROM {table} WHERE {column} IS NOT NULL")).scalar_one()
    return total


def check_readable(engine: Engine, box: SecretBox | None) -> None:
    """Refuse to start without a key over a database that holds secrets (clearly, not at the
    first upstream call)."""
    if box is None and stored_secrets(engine):
        raise SecretsKeyMissing(f"the database holds upstream API keys, but {MISSING}")
