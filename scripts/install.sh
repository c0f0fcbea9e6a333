#!/usr/bin/env bash
# Set up this checkout on a Debian machine; safe to run again (it only does
# what is missing).
#
#   - PostgreSQL and etcd binaries (Debian's `postgresql`, `etcd-server`),
#     `etcdctl` (`etcd-client`) and `openssl` when absent. The tests start
#     their own throwaway servers; the services the packages come with are not
#     left running. Every program the tests run comes from here (or the venv,
#     the npm packages, the Go and Java toolchains below):
#     tests/unit/test_install_provides.py reads the tests' sources and fails
#     when one is not installed by this script.
#   - Python 3.11 with venv support, a `.venv` at the repo root, and the
#     project's two distributions installed into it editable, the server's
#     with its test extras (skipped when neither pyproject.toml has changed
#     since the last install).
#
# Needs root (or sudo) only when a Debian package is missing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT=$(pwd)
VENV="$REPO_ROOT/.venv"
PYTHON=python3.11
STAMP="$VENV/.tickwheel-install-stamp"

log() { echo "install.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# One install at a time per checkout: test runs started together share .venv.
LOCK_FILE="${TMPDIR:-/tmp}/tickwheel-install-$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-16).lock"
exec 9>"$LOCK_FILE"
flock 9

# --------------------------------------------------------------- Debian packages

have_postgres() {
    [[ -n "${TICKWHEEL_PG_BINDIR:-}" && -x "${TICKWHEEL_PG_BINDIR}/initdb" ]] && return 0
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && return 0
    command -v initdb >/dev/null && command -v postgres >/dev/null
}

have_etcd() {
    [[ -n "${TICKWHEEL_ETCD_BIN:-}" && -x "${TICKWHEEL_ETCD_BIN}" ]] && return 0
    command -v etcd >/dev/null
}

have_etcdctl() {
    command -v etcdctl >/dev/null
}

have_openssl() {
    command -v openssl >/dev/null
}

have_ss() {
    # The benchmarks' harness reads the server's TCP bytes with ss (iproute2);
    # the suite's benchmark smoke tests run it.
    command -v ss >/dev/null 2>&1
}

have_promtool() {
    # tests/integration/test_deploy.py checks deploy/prometheus's rules with it.
    command -v promtool >/dev/null 2>&1
}

have_systemd_analyze() {
    # tests/integration/test_deploy.py verifies deploy/systemd's units with it.
    command -v systemd-analyze >/dev/null 2>&1
}

have_zsh() {
    # tests/unit/cli/test_completion.py runs `tickwheel completion zsh` in it.
    command -v zsh >/dev/null 2>&1
}

have_python() {
    command -v "$PYTHON" >/dev/null && "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null
}

as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "need root to run: $* (run as root or install sudo)"
    fi
}

# Debian packages start their services on install (postgresql also creates and
# starts a `main` cluster). A policy-rc.d that says "no" (101) stops that, the
# same way Docker images do; ours is removed again afterwards.
POLICY_RC=/usr/sbin/policy-rc.d
OUR_POLICY_RC=""
remove_our_policy_rc() {
    if [[ -n "$OUR_POLICY_RC" ]]; then
        as_root rm -f "$POLICY_RC"
        OUR_POLICY_RC=""
    fi
}

stop_package_services() {
    # Only services of the packages just installed ("$@"): never a server someone set up.
    local services=() package
    for package in "$@"; do
        case "$package" in
            postgresql) services+=(postgresql) ;;
            etcd-server) services+=(etcd) ;;
            prometheus) services+=(prometheus) ;;
        esac
    done
    if [[ -d /run/systemd/system && ${#services[@]} -gt 0 ]]; then
        as_root systemctl disable --now "${services[@]}" >/dev/null 2>&1 || true
    fi
    if [[ " ${services[*]} " == *" postgresql "* ]] && command -v pg_lsclusters >/dev/null; then
        pg_lsclusters --no-header 2>/dev/null | while read -r version cluster _port status _rest; do
            if [[ "$status" == online* ]]; then
                log "stopping the Debian PostgreSQL cluster $version/$cluster the package started"
                as_root pg_ctlcluster "$version" "$cluster" stop || true
            fi
        done
    fi
}

install_debian_packages() {
    local packages=()
    have_postgres || packages+=(postgresql)
    have_etcd || packages+=(etcd-server)
    have_etcdctl || packages+=(etcd-client)
    have_openssl || packages+=(openssl)
    have_ss || packages+=(iproute2)
    have_promtool || packages+=(prometheus)
    have_systemd_analyze || packages+=(systemd)
    have_zsh || packages+=(zsh)
    if ! have_python; then
        packages+=(python3.11 python3.11-venv)
    fi
    [[ ${#packages[@]} -eq 0 ]] && return 0
    command -v apt-get >/dev/null || die "missing ${packages[*]} and this is not a Debian-like system (no apt-get)"

    log "installing ${packages[*]}"
    if [[ ! -e "$POLICY_RC" ]]; then
        printf '#!/bin/sh\n# written by tickwheel scripts/install.sh for the duration of apt-get\nexit 101\n' |
            as_root tee "$POLICY_RC" >/dev/null
        as_root chmod 755 "$POLICY_RC"
        OUR_POLICY_RC=1
        trap remove_our_policy_rc EXIT
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${packages[@]}"
    remove_our_policy_rc
    stop_package_services "${packages[@]}"

    have_postgres || die "PostgreSQL is still missing after installing it (no /usr/lib/postgresql/*/bin/initdb)"
    have_etcd || die "etcd is still missing after installing etcd-server"
    have_etcdctl || die "etcdctl is still missing after installing etcd-client"
    have_openssl || die "openssl is still missing after installing it"
    have_ss || die "ss is still missing after installing iproute2"
    have_promtool || die "promtool is still missing after installing prometheus"
    have_systemd_analyze || die "systemd-analyze is still missing after installing systemd"
    have_zsh || die "zsh is still missing after installing it"
    have_python || die "$PYTHON with venv support is still missing"
}

# ------------------------------------------------------------------ Python venv

setup_venv() {
    if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
        log "creating $VENV with $PYTHON"
        "$PYTHON" -m venv --clear "$VENV"
    fi

    local want
    want=$( { sha256sum pyproject.toml server/pyproject.toml; "$VENV/bin/python" -VV; } | sha256sum | cut -c1-64)
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$VENV/bin/python" -c 'import tickwheel_server' 2>/dev/null; then
        return 0
    fi
    # Two distributions, both editable: tickwheel (SDK and worker, ./) and
    # tickwheel-server (./server), with the test extra.
    log "installing the project into $VENV (pip install -e . -e './server[test]')"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q -e . -e './server[test]'
    echo "$want" >"$STAMP"
}

# ------------------------------------------------- Node/npm (sdk/typescript)
# buf and protoc-gen-es come from the npm registry at the versions pinned in
# sdk/typescript/package-lock.json; `npm ci` only when the lock file changed.

setup_node() {
    if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
        command -v apt-get >/dev/null || die "npm is missing and this is not a Debian-like system"
        log "installing nodejs and npm"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm
    fi
    local stamp="sdk/typescript/node_modules/.tickwheel-install-stamp" want
    want=$(sha256sum sdk/typescript/package-lock.json | cut -c1-64)
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x sdk/typescript/node_modules/.bin/buf ]]; then
        return 0
    fi
    log "installing sdk/typescript's npm packages (npm ci)"
    (cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$stamp"
}

# ------------------------------------------ Go and Java (sdk/go, sdk/java)
# The Go SDK's modules and its code generators (protoc-gen-go and
# protoc-gen-go-grpc at the versions sdk/go/go.mod pins, built into
# sdk/go/.tools) come from the Go module proxy; the Java SDK's dependencies
# and its code generators (protoc and protoc-gen-grpc-java at the versions
# sdk/java/pom.xml pins, copied into sdk/java/.tools) from Maven Central. Each
# is fetched again only when go.mod/go.sum or pom.xml changed or a tool is
# missing. The module cache and ~/.m2 are only caches: deleting them costs a
# download, nothing else.

# The go command: the toolchain fetched below when there is one, else on
# PATH, else where the Go distribution installs itself. The SDK tests look in
# the same places.
find_go() {
    [[ -x sdk/go/.tools/go ]] && echo "$REPO_ROOT/sdk/go/.tools/go" && return 0
    command -v go 2>/dev/null && return 0
    [[ -x /usr/local/go/bin/go ]] && echo /usr/local/go/bin/go
}

# True when the Go at $1 is at least version $2 (as go.mod writes it: 1.26.0).
go_at_least() {
    local have
    have=$("$1" env GOVERSION 2>/dev/null) || have=$("$1" version | awk '{print $3}')
    have=${have#go}
    [[ "$(printf '%s\n%s\n' "$2" "$have" | sort -V | head -n1)" == "$2" ]]
}

setup_go_java() {
    local go want stamp tools
    # Go: Debian's golang-go (1.19) when there is none, and when the Go found
    # is older than go.mod asks, the toolchain module the go command itself
    # would fetch (golang.org/toolchain, from the module proxy); Go before 1.21
    # cannot fetch it by itself.
    want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' sdk/go/go.mod)
    go=$(find_go) || true
    if [[ -z "$go" ]]; then
        command -v apt-get >/dev/null || die "Go is missing and this is not a Debian-like system"
        log "installing golang-go"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends golang-go
        go=$(command -v go)
    fi
    if ! go_at_least "$go" "$want"; then
        local module="golang.org/toolchain@v0.0.1-go$want.linux-amd64" dir
        log "Go $want needed; fetching $module"
        dir=$(cd "${TMPDIR:-/tmp}" && "$go" mod download -json "$module" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
        [[ -n "$dir" ]] || die "could not fetch $module"
        # Module zips keep no exec bits.
        chmod -R u+w "$dir" && chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/*
        mkdir -p sdk/go/.tools && ln -sfn "$dir/bin/go" sdk/go/.tools/go
        go="$REPO_ROOT/sdk/go/.tools/go"
    fi
    stamp=sdk/go/.tools/.tickwheel-install-stamp
    want=$( { sha256sum sdk/go/go.mod sdk/go/go.sum; "$go" version; } | sha256sum | cut -c1-64)
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x sdk/go/.tools/protoc-gen-go || ! -x sdk/go/.tools/protoc-gen-go-grpc ]]; then
        log "fetching sdk/go's modules and building its code generators (go mod download, go install tool)"
        (cd sdk/go && "$go" mod download && GOBIN="$REPO_ROOT/sdk/go/.tools" "$go" install tool)
        echo "$want" >"$stamp"
    fi

    # Java: Debian's JDK and Maven when either is missing.
    if ! command -v mvn >/dev/null || ! command -v javac >/dev/null || ! command -v java >/dev/null; then
        command -v apt-get >/dev/null || die "Maven or a JDK is missing and this is not a Debian-like system"
        log "installing maven and default-jdk-headless"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends maven default-jdk-headless
    fi
    stamp=sdk/java/.tools/.tickwheel-install-stamp
    want=$(sha256sum sdk/java/pom.xml | cut -c1-64)
    tools=(sdk/java/.tools/protoc sdk/java/.tools/protoc-gen-grpc-java)
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x "${tools[0]}" || ! -x "${tools[1]}" ]]; then
        # go-offline takes most of what the build needs; the first build
        # fetches the few plugin parts it cannot foresee.
        log "fetching sdk/java's Maven dependencies and code generators (dependency:go-offline, dependency:copy@codegen-tools)"
        mvn -q -B -Dstyle.color=never -f sdk/java/pom.xml dependency:go-offline dependency:copy@codegen-tools
        chmod +x "${tools[@]}"
        echo "$want" >"$stamp"
    fi
}

# ------------------------------------------- Chromium (the web console's tests)
# tests/integration/test_console.py drives Debian's headless Chromium through
# Debian's ChromeDriver (packages chromium and chromium-driver, built from one
# source, so browser and driver versions always match; fonts-liberation so
# that screenshots show text) with selenium from PyPI at the version pinned
# here. Nothing is fetched when all of them are present.

SELENIUM_VERSION=4.51.0

setup_browser() {
    if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
        command -v apt-get >/dev/null || die "Chromium is missing and this is not a Debian-like system"
        log "installing chromium, chromium-driver and fonts-liberation"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            chromium chromium-driver fonts-liberation
        [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]] || die "Chromium is still missing after installing it"
    fi
    if [[ ! -d "$VENV/lib/$PYTHON/site-packages/selenium-$SELENIUM_VERSION.dist-info" ]]; then
        log "installing selenium $SELENIUM_VERSION into $VENV"
        "$VENV/bin/python" -m pip install --disable-pip-version-check -q "selenium==$SELENIUM_VERSION"
    fi
}

# --bench: also the benchmarks' own dependencies (server/pyproject's `bench` extra:
# pgqueuer, the peer loadtest/bench_create.py measures; pgqueuer, APScheduler
# and asyncpg, the peers loadtest/peers.py runs beside Tickwheel). The tests
# never need them, so nothing installs them unless asked.
setup_bench() {
    if ! "$VENV/bin/python" -c 'import pgqueuer, psycopg_pool, apscheduler, asyncpg' 2>/dev/null; then
        log "installing the bench extra into $VENV (pip install -e . -e './server[test,bench]')"
        "$VENV/bin/python" -m pip install --disable-pip-version-check -q -e . -e './server[test,bench]'
    fi
}

# --dev: only what `tickwheel dev` needs (Python and the venv); the tests and
# code generation also need PostgreSQL, etcd, the npm packages and the Go and
# Java toolchains.
if [[ " $* " == *" --dev "* ]]; then
    have_python || install_debian_packages
    setup_venv
else
    install_debian_packages
    setup_venv
    setup_browser
    setup_node
    setup_go_java
fi
if [[ " $* " == *" --bench "* ]]; then
    setup_bench
fi
log "ready: $VENV"
