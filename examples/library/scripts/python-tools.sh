#!/usr/bin/env bash
# Creates (once) a virtual environment in the cache with the pinned Python packages
# of scripts/requirements-NAME.txt (NAME: tools, the default, or localstack), and
# prints its bin folder.
#
#   PATH="$(scripts/python-tools.sh):$PATH" cfn-lint template.yaml
#   "$(scripts/python-tools.sh localstack)/python" -m localstack.runtime.main
#
# The cache is $SEQUENCE_GUARD_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/sequence-guard.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name="${1:-tools}"
requirements="$here/requirements-$name.txt"
[ -f "$requirements" ] || { echo "no $requirements" >&2; exit 2; }
cache="${SEQUENCE_GUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sequence-guard}"
stamp=$(sha256sum "$requirements" | cut -c1-12)
venv="$cache/venv-$name-$stamp"

mkdir -p "$cache"
exec 9>"$cache/.venv-$name.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  python=$(command -v python3 || true)
  [ -n "$python" ] || { echo "python3 is needed for the Python tools" >&2; exit 1; }
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2
  echo "installing the pinned Python tools of $(basename "$requirements") into $venv (once; a few minutes)..." >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  echo "installed." >&2
  touch "$venv/.complete"
fi
echo "$venv/bin"
