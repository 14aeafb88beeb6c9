"""First start: a gateway a newcomer can call at once.

`fairgate serve` on an empty database with no FAIRGATE_ADMIN_TOKEN makes an admin token (the
database keeps only its SHA-256, like a notebook server's token), a `default` tenant and one
API key for it, and prints them once with a ready `curl` and `openai` line and where the
dashboard is. Both lines work as printed: the python line names this process's interpreter (the
venv's, where `openai` is installed; a bare `python` may have no `openai`), and both ask for a
short answer (FIRST_ANSWER_TOKENS), so the first reply comes in seconds rather than after the
model fills its whole context. Every later start prints where the gateway listens, never a secret.

Replicas starting together on one empty database: the credential's fixed primary key and the
tenant's unique name make the insert fail for all but one; the others print the URL only.
"""

from __future__ import annotations

import json
import logging
import secrets
import shlex
import sys
from dataclasses import dataclass
from typing import TextIO

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from fairgate.gateway.admin.token import ADMIN, stored_hash
from fairgate.gateway.request.keys import generate_key, hash_key
from fairgate.gateway.store.tables import AdminCredential, ApiKey, AuditEntry, Tenant

log = logging.getLogger("fairgate.first_run")
DEFAULT_TENANT = "default"
FIRST_ANSWER_TOKENS = 32  # the printed lines' max_tokens: a first answer in seconds on a CPU


@dataclass(slots=True)
class FirstRun:
    """The secrets made on first start: shown once, then dropped."""

    admin_token: str
    api_key: str
    tenant_id: str


def bootstrap(sessions: sessionmaker[Session]) -> FirstRun | None:
    """Make the admin token, the `default` tenant and its key if the database is empty and
    holds no admin token; None otherwise (or when another replica did it first)."""
    with sessions() as s:
        if stored_hash(s) is not None or s.scalar(select(func.count()).select_from(Tenant)):
            return None
        token = secrets.token_urlsafe(32)
        key, prefix, digest = generate_key()
        tenant = Tenant(name=DEFAULT_TENANT)
        try:
            s.add(tenant)
            s.flush()  # a replica racing us fails here (the name) or at commit (the credential)
            s.add(AdminCredential(name=ADMIN, token_hash=hash_key(token)))
            s.add(ApiKey(tenant_id=tenant.id, prefix=prefix, key_hash=digest, name="first-run"))
            s.add(AuditEntry(actor="first_run", action="create", target_type="tenant", target_id=tenant.id,
                             detail={"name": DEFAULT_TENANT, "key_prefix": prefix}))
            s.commit()
        except IntegrityError:  # another replica got there first
            s.rollback()
            return None
    log.info("first start: made the admin token and the %r tenant with key %s...", DEFAULT_TENANT, prefix)
    return FirstRun(token, key, tenant.id)


def base_url(host: str, port: int) -> str:
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def banner(url: str, first: FirstRun | None, model: str | None, out: TextIO = sys.stdout) -> None:
    """Where the gateway listens; on first start also the secrets, once, and how to call it."""
    dashboard = f"{url}/admin/dashboard"
    if first is None:
        print(f"fairgate gateway listening on {url} (dashboard: {dashboard})", file=out, flush=True)
        return
    model = model or "MODEL"
    body = json.dumps({"model": model, "max_tokens": FIRST_ANSWER_TOKENS,
                       "messages": [{"role": "user", "content": "Hello"}]})
    python = (f"from openai import OpenAI; c = OpenAI(base_url='{url}/v1', api_key='{first.api_key}'); "
              f"print(c.chat.completions.create(model='{model}', max_tokens={FIRST_ANSWER_TOKENS}, "
              f"messages=[{{'role': 'user', 'content': 'Hello'}}]).choices[0].message.content)")
    lines = [
        f"fairgate gateway listening on {url}",
        "",
        "First start: made an admin token and a `default` tenant with one API key.",
        "They are shown this once only; the database keeps only their hashes.",
        f"  admin token:  {first.admin_token}",
        f"  API key:      {first.api_key}   (tenant `default`)",
        f"  dashboard:    {dashboard}   (sign in with the admin token;"
        f" a tenant signs in at {url}/dashboard with its key)",
        "",
        "Try it:",
        f"  curl {url}/v1/chat/completions -H 'Authorization: Bearer {first.api_key}' "
        f"-H 'Content-Type: application/json' -d '{body}'",
        f'  {shlex.quote(sys.executable or "python3")} -c "{python}"',
        "",
        f"Admin API: curl {url}/admin/tenants -H 'Authorization: Bearer {first.admin_token}'",
    ]
    print("\n".join(lines), file=out, flush=True)
