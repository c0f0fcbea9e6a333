#!/usr/bin/env bash
# Regenerates every SDK's generated code from proto/ with buf and local plugins.
# Generated code is never edited by hand; CI runs `scripts/generate.sh --check`
# and fails when regenerating changes the tree.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
buf="sdk/typescript/node_modules/.bin/buf"
[ -x "$buf" ] || { echo "generate: $buf missing; run scripts/install.sh" >&2; exit 2; }

generate() {
  # Remove what the previous run generated, keeping hand-written files.
  find sdk/python/tickwheel/v1 -name '*_pb2*.py*' -delete
  rm -rf sdk/typescript/src/gen
  "$buf" format -w
  "$buf" generate
  # Python takes google.rpc from googleapis-common-protos; only the TypeScript
  # SDK needs the vendored copies generated.
  rm -rf sdk/python/google
}

if [ "${1:-}" = "--check" ]; then
  before="$(git status --porcelain -- proto sdk)"
  generate
  after="$(git status --porcelain -- proto sdk)"
  if [ "$before" != "$after" ] || ! git diff --quiet -- proto sdk/python/tickwheel/v1 sdk/typescript/src/gen; then
    echo "generate: generated code or proto formatting differs from the committed tree:" >&2
    git status --porcelain -- proto sdk >&2
    git --no-pager diff --stat -- proto sdk >&2
    exit 1
  fi
  echo "generate: generated code is up to date"
else
  generate
fi
