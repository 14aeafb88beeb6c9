"""`fairgate apply -f FILE` and `fairgate export`, and the apply at `serve --config` start."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.exc import IntegrityError

from fairgate.gateway.config.declarative import ConfigError, Declared, load_file

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from fairgate.gateway.settings import Settings


def apply_in_db(sessions: sessionmaker[Session], config: Declared, prune: bool = False) -> list[str]:
    """One transaction; a second try when another replica created the same rows meanwhile."""
    from fairgate.gateway.config.apply import apply_config

    for attempt in range(2):
        try:
            with sessions.begin() as s:
                return apply_config(s, config, prune)
        except IntegrityError:
            if attempt:
                raise
    return []


async def bump_version(settings: Settings) -> None:
    from fairgate.gateway.app import make_quota_store

    store = make_quota_store(settings)
    try:
        await store.config_bus().bump()
    finally:
        await store.aclose()


def run_apply(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import StatementError

    from fairgate.gateway.settings import load_settings
    from fairgate.gateway.store.db import make_engine, make_sessionmaker, upgrade
    from fairgate.gateway.store.secret_box import SecretsKeyMissing, box_from_settings

    try:
        declared = load_file(args.file)
        settings = load_settings(args.config, values=declared.settings)
        secrets = box_from_settings(settings)
        upgrade(settings.database_url, secrets=secrets)
        db = make_engine(settings.database_url, secrets)
        try:
            changes = apply_in_db(make_sessionmaker(db), declared.config, args.prune)
        finally:
            db.dispose()
    except (ConfigError, ValueError, SecretsKeyMissing, StatementError) as exc:
        if isinstance(exc, StatementError) and not isinstance(exc.orig, SecretsKeyMissing):
            raise
        print(f"fairgate apply: {getattr(exc, 'orig', exc)}", file=sys.stderr)
        return 1
    if changes:
        asyncio.run(bump_version(settings))  # every running replica reloads
    for line in changes or ["no changes"]:
        print(line)
    return 0


def run_export(args: argparse.Namespace) -> int:
    from fairgate.gateway.config.export import export_yaml
    from fairgate.gateway.settings import load_settings
    from fairgate.gateway.store.db import make_engine, make_sessionmaker
    from fairgate.gateway.store.secret_box import box_from_settings

    try:
        settings = load_settings(args.config)
    except ValueError as exc:
        print(f"fairgate export: {exc}", file=sys.stderr)
        return 1
    db = make_engine(settings.database_url, box_from_settings(settings))
    try:
        with make_sessionmaker(db)() as s:
            text = export_yaml(s)
    finally:
        db.dispose()
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ap = sub.add_parser("apply", help="apply a declarative configuration file (idempotent)")
    ap.add_argument("-f", "--file", required=True, help="YAML: settings, backends, pools, tenants, routes, prices")
    ap.add_argument("--config", default=None, help="settings file (database_url, redis_url) if not in FILE")
    ap.add_argument("--prune", action="store_true", help="delete backends/pools and disable tenants not in FILE")
    ex = sub.add_parser("export", help="write the current configuration as a declarative file")
    ex.add_argument("--config", default=None, help="settings file (database_url)")
    ex.add_argument("-o", "--output", default=None, help="file to write (default: stdout)")
