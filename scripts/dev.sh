#!/usr/bin/env bash
# The run command: set up what `tickwheel dev` needs on a fresh machine (a
# Python 3.11 venv with Tickwheel in it), then run it. Arguments go to
# `tickwheel dev` (e.g. --listen 127.0.0.1:50051 --data .tickwheel).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install.sh --dev
exec .venv/bin/tickwheel dev "$@"
