"""`tickwheel migrate`: apply the schema migrations to a store and report."""

from __future__ import annotations

import argparse
import os
import sys

from tickwheel.shared.secretargs import flag_warning, url_has_password

from .engine import create_store_engine
from .errors import StoreError
from .migrate import current_version, load_migrations, migrate


def build_parser() -> argparse.ArgumentParser:
    """The flags of ``tickwheel migrate`` (also read by ``tickwheel completion``)."""
    parser = argparse.ArgumentParser(prog="tickwheel migrate", description="Apply schema migrations to a store.")
    parser.add_argument(
        "--store", help="store URL (or TICKWHEEL_STORE, where a URL with a password belongs: ps shows flags)"
    )
    parser.add_argument("--status", action="store_true", help="only print the current and latest versions")
    return parser


def migrate_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.store and url_has_password(args.store):
        print(f"warning: {flag_warning('--store with a password', 'TICKWHEEL_STORE', 'PGPASSFILE')}", file=sys.stderr)
    args.store = args.store or os.environ.get("TICKWHEEL_STORE", "")
    if not args.store:
        print("error: --store URL (or TICKWHEEL_STORE) is required", file=sys.stderr)
        return 2
    try:
        engine = create_store_engine(args.store)
    except StoreError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        latest = max((m.version for m in load_migrations()), default=0)
        if args.status:
            print(f"schema version {current_version(engine)}; latest {latest}")
            return 0
        applied = migrate(engine)
        for item in applied:
            print(f"applied {item.version:04d} {item.name}")
        print(f"schema version {current_version(engine)} (latest {latest})")
        return 0
    except StoreError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
