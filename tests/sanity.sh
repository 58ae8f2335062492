#!/bin/bash
# ansible-test sanity on the collection, without docker: ansible-test needs the
# collection under .../ansible_collections/<ns>/<name>, so the tracked files (and
# new, not yet ignored ones) are copied there first.
# Usage: tests/sanity.sh [extra ansible-test args, e.g. --test validate-modules]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
dest=.ansible/sanity/ansible_collections/eagle3/extraction
rm -rf "$dest"; mkdir -p "$dest"
git ls-files --cached --others --exclude-standard -z | xargs -0 cp --parents -t "$dest" 2>/dev/null || true
cd "$dest"
# ansible-test only looks at files git knows of when it finds a repository
git init -q && git add -A >/dev/null
export PATH=$OLDPWD/$VENV/bin:$PATH
exec ansible-test sanity --venv --python "$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --requirements --color no "$@"
