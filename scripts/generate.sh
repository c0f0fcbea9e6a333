#!/usr/bin/env bash
# Regenerates every SDK's generated code from proto/ with buf and local plugins.
# Generated code is never edited by hand.
#
#   scripts/generate.sh           format proto/ and rewrite the generated code
#   scripts/generate.sh --check   generate into a temporary folder and fail if
#                                 it differs from the tree (changes nothing)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
buf="sdk/typescript/node_modules/.bin/buf"
# buf and every local plugin buf.gen.yaml names; scripts/install.sh fetches them.
for tool in "$buf" sdk/go/.tools/protoc-gen-go sdk/go/.tools/protoc-gen-go-grpc \
    sdk/java/.tools/protoc sdk/java/.tools/protoc-gen-grpc-java; do
  [ -x "$tool" ] || { echo "generate: $tool missing; run scripts/install.sh" >&2; exit 2; }
done

# What buf writes, relative to its output folder, and which of it is ours to
# compare: Python keeps its hand-written __init__.py beside the generated modules.
python_gen="sdk/python/tickwheel/v1"
typescript_gen="sdk/typescript/src/gen"
go_gen="sdk/go/gen"
java_gen="sdk/java/src/main/java/dev/tickwheel/v1"

generate_into() {
  "$buf" generate --output "$1"
  # Python takes google.rpc from googleapis-common-protos, Go from genproto,
  # Java from proto-google-common-protos; only the TypeScript SDK needs the
  # vendored copies generated.
  rm -rf "$1/sdk/python/google" "$1/$go_gen/google" "$1/sdk/java/src/main/java/com/google/rpc"
  rmdir "$1/sdk/java/src/main/java/com/google" "$1/sdk/java/src/main/java/com" 2>/dev/null || true
}

if [ "${1:-}" = "--check" ]; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  generate_into "$scratch"
  status=0
  diff -r -x __init__.py -x __pycache__ "$scratch/$python_gen" "$python_gen" >&2 || status=1
  diff -r "$scratch/$typescript_gen" "$typescript_gen" >&2 || status=1
  diff -r "$scratch/$go_gen" "$go_gen" >&2 || status=1
  diff -r "$scratch/$java_gen" "$java_gen" >&2 || status=1
  if [ $status -ne 0 ]; then
    echo "generate: the generated code differs from proto/; run scripts/generate.sh and commit" >&2
    exit 1
  fi
  echo "generate: generated code is up to date"
else
  "$buf" format -w
  find "$python_gen" -name '*_pb2*.py*' -delete
  rm -rf "$typescript_gen" "$go_gen" "$java_gen"
  generate_into .
fi
