"""Encrypt upstream API keys stored in plaintext (backends, pools, pool replicas).

Revision ID: 0008_secrets_encrypt_keys
Revises: 0007_cost20_hourly_prices

Needs the secrets key (FAIRGATE_SECRETS_KEY, see gateway/store/secret_box.py) when any plaintext key
is stored; without it the upgrade stops with that message and changes nothing. Values already
encrypted are left as they are. The downgrade writes them back in plaintext (same key needed).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_secrets_encrypt_keys"
down_revision = "0007_cost20_hourly_prices"
branch_labels = None
depends_on = None

COLUMNS = (("backends", "api_key"), ("backend_pools", "api_key"), ("pool_replicas", "api_key"))
PREFIX = "fernet:"


def _box():  # type: ignore[no-untyped-def]
    from fairgate.gateway.settings import Settings
    from fairgate.gateway.store.secret_box import box_from_settings

    bind = op.get_bind()
    box = getattr(bind.dialect, "fairgate_secret_box", None)
    return box if box is not None else box_from_settings(Settings())


def _rewrite(encrypt: bool) -> None:
    bind = op.get_bind()
    box = None
    for table, column in COLUMNS:
        rows = bind.execute(sa.text(f"SELECT id, {column} FROM {table} WHERE {column} IS NOT NULL")).all()
        todo = [(i, v) for i, v in rows if v.startswith(PREFIX) != encrypt]
        if not todo:
            continue
        box = box or _box()
        if box is None:
            raise RuntimeError(f"{table}.{column} holds upstream API keys: set FAIRGATE_SECRETS_KEY (a Fernet "
                               "key) so this migration can encrypt them")
        for row_id, value in todo:
            new = box.encrypt(value) if encrypt else box.decrypt(value)
            bind.execute(sa.text(f"UPDATE {table} SET {column} = :v WHERE id = :i"), {"v": new, "i": row_id})


def upgrade() -> None:
    _rewrite(encrypt=True)


def downgrade() -> None:
    _rewrite(encrypt=False)
