#!/usr/bin/env bash
# Creates (once) a virtual environment in the cache with the pinned Python tools
# of scripts/requirements-tools.txt, and prints its bin folder.
#
#   PATH="$(scripts/python-tools.sh):$PATH" cfn-lint template.yaml
#
# The cache is $SEQUENCE_GUARD_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/sequence-guard.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/requirements-tools.txt"
cache="${SEQUENCE_GUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sequence-guard}"
stamp=$(sha256sum "$requirements" | cut -c1-12)
venv="$cache/venv-$stamp"

mkdir -p "$cache"
exec 9>"$cache/.venv.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  python=$(command -v python3 || true)
  [ -n "$python" ] || { echo "python3 is needed for the Python tools" >&2; exit 1; }
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin"
