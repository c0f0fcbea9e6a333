#!/usr/bin/env bash
# The test command: set up what is missing, run the whole suite, leave nothing
# running. Extra arguments go to pytest (e.g. `bash scripts/test.sh -x tests/unit`).
#
# The tests run on TICKWHEEL_TEST_WORKERS pytest-xdist workers (3 unless set),
# each with its own PostgreSQL and etcd, tests/conftest.py handing each worker
# whole modules (the SDK toolchain modules together, to one): most of the
# integration tests' time is spent waiting on servers, workers and toolchains,
# which three workers overlap on two cores (on the project's 2-core machine
# the suite took 22 min on two, 17 on three: loadtest/RESULTS.md).
# TICKWHEEL_TEST_WORKERS=0 runs them in pytest's own process instead, in file
# order.
#
# Exit status is pytest's: non-zero on any failure, including 5 (no tests
# collected). The session fixtures start and stop PostgreSQL and etcd; pytest
# runs in its own session so that whatever is still running when it exits
# (a server a fixture failed to stop, pytest itself after a signal) is found
# and stopped here.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "test.sh: $*" >&2; }

bash scripts/install.sh

export HYPOTHESIS_PROFILE=ci

# Python caches bytecode for the run. Container images often set PYTHONDONTWRITEBYTECODE: then
# every Python process the suite starts (servers, workers, CLI calls: hundreds) compiles the
# project's own modules again (site-packages has its .pyc from pip), and each pytest-xdist worker
# rewrites and compiles every test module again. The caches go in __pycache__ folders, which git
# ignores; an unchanged tree reuses them in the next run.
unset PYTHONDONTWRITEBYTECODE

# Everything the run writes to temporary folders (servers' data, tmp_path)
# goes under one folder, in RAM when there is room, deleted at the end even
# if pytest is killed.
scratch_parent="${TMPDIR:-/tmp}"
if [[ -d /dev/shm && -w /dev/shm ]] && (( $(df -Pk /dev/shm | awk 'NR==2 {print $4}') >= 1048576 )); then
    scratch_parent=/dev/shm
fi
SCRATCH=$(mktemp -d "$scratch_parent/tickwheel-test-XXXXXX")
chmod 755 "$SCRATCH"  # the postgres user must reach its folder inside
export TMPDIR="$SCRATCH" TICKWHEEL_TEST_TMPDIR="$SCRATCH"
# Marks every process this run starts, even one that leaves pytest's session.
RUN_ID="tickwheel-test-$$-$(date +%s%N)"

pytest_pid=""
interrupted=0

session_pids() {
    [[ -n "$pytest_pid" ]] || return 0
    pgrep -s "$pytest_pid" 2>/dev/null || true
    grep -lzx "TICKWHEEL_TEST_RUN_ID=$RUN_ID" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}

stop_leftovers() {
    local pids
    pids=$(session_pids | sort -un | grep -vx "$$" || true)
    [[ -n "$pids" ]] || return 0
    log "stopping processes left running: $(echo $pids)"
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for _ in $(seq 50); do
        pids=$(for pid in $pids; do kill -0 "$pid" 2>/dev/null && echo "$pid"; done || true)
        [[ -n "$pids" ]] || return 0
        sleep 0.1
    done
    log "killing: $(echo $pids)"
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
}

on_signal() {
    # First signal: let pytest run its finalizers (they stop the servers).
    # Second: stop everything now.
    interrupted=$((interrupted + 1))
    if [[ -z "$pytest_pid" ]]; then
        exit 130
    elif [[ $interrupted -eq 1 ]]; then
        log "interrupted; letting pytest stop its servers (again to force)"
        kill -INT "$pytest_pid" 2>/dev/null || true
    else
        stop_leftovers
    fi
}

finish() {
    stop_leftovers
    rm -rf "$SCRATCH"
}

trap finish EXIT
trap on_signal INT TERM HUP

workers="${TICKWHEEL_TEST_WORKERS:-3}"
[[ "$workers" =~ ^[0-9]+$ ]] || { log "TICKWHEEL_TEST_WORKERS must be a number, got '$workers'"; exit 2; }
parallel=()
(( workers == 0 )) || parallel=(-n "$workers")

# A background job of a script starts with SIGINT ignored; env restores it so
# that pytest turns SIGINT into KeyboardInterrupt and runs its finalizers.
TICKWHEEL_TEST_RUN_ID="$RUN_ID" setsid env --default-signal=INT .venv/bin/python -m pytest "${parallel[@]}" "$@" &
pytest_pid=$!

status=0
while :; do
    wait "$pytest_pid" && status=0 || status=$?
    # wait also returns when a trapped signal arrives; go on until pytest has exited.
    kill -0 "$pytest_pid" 2>/dev/null || break
done

if [[ $status -eq 5 ]]; then
    log "pytest collected no tests (exit 5): failing"
elif [[ $status -ne 0 ]]; then
    log "pytest failed (exit $status)"
fi
exit "$status"
