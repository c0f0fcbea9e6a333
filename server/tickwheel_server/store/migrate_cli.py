"""`tickwheel migrate`: apply the schema migrations to a store and report."""

from __future__ import annotations

import argparse
import os
import sys

from .engine import create_store_engine
from .errors import StoreError
from .migrate import current_version, load_migrations, migrate


def migrate_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tickwheel migrate", description="Apply schema migrations to a store.")
    parser.add_argument("--store", default=os.environ.get("TICKWHEEL_STORE", ""), help="store URL (or TICKWHEEL_STORE)")
    parser.add_argument("--status", action="store_true", help="only print the current and latest versions")
    args = parser.parse_args(argv)
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
