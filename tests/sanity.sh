#!/usr/bin/env bash
# ansible-test sanity on the collection, without docker: ansible-test needs the
# collection under .../ansible_collections/<ns>/<name>, so the tracked files (and
# new, not yet ignored ones) are copied there first.
# Usage: tests/sanity.sh [extra ansible-test args, e.g. --test validate-modules]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# a private copy per run: several runs may overlap on one machine
mkdir -p .ansible/sanity
work=$(mktemp -d "$PWD/.ansible/sanity/run.XXXXXX")
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/eagle3/extraction
mkdir -p "$dest"
git ls-files --cached --others --exclude-standard -z | xargs -0 cp --parents -t "$dest" 2>/dev/null || true
cd "$dest"
# ansible-test only looks at files git knows of when it finds a repository
git init -q && git add -A >/dev/null
export PATH=$OLDPWD/$VENV/bin:$PATH
ansible-test sanity --venv --python "$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --requirements --color no "$@"
