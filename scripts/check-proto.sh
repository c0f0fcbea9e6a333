#!/usr/bin/env bash
# The contract's gate: buf lint (STANDARD), buf format, the breaking-change
# check against the previous commit, and generated-code drift.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
buf="sdk/typescript/node_modules/.bin/buf"
"$buf" lint
"$buf" format --diff --exit-code
# Breaking changes are judged against the previous commit that had a contract.
# TICKWHEEL_BREAKING_BASE overrides it (a release tag, say).
base="${TICKWHEEL_BREAKING_BASE:-HEAD~1}"
if git rev-parse -q --verify "$base^{commit}" >/dev/null && git cat-file -e "$base:proto/tickwheel/v1" 2>/dev/null; then
  "$buf" breaking --against ".git#ref=$(git rev-parse "$base"),subdir=."
  echo "check-proto: no breaking change against $base"
else
  echo "check-proto: no contract at $base; breaking check has nothing to compare"
fi
bash scripts/generate.sh --check
