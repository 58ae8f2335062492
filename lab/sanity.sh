#!/usr/bin/env bash
# ansible-test sanity on the collection, without docker: ansible-test needs the
# collection under .../ansible_collections/<ns>/<name>, so the tracked files (and
# new, not yet ignored ones) are copied there first.
# Usage: lab/sanity.sh [extra ansible-test args, e.g. --test validate-modules]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# ansible-test bootstraps pip in its venvs with a script from ci-files.testing.ansible.com,
# which is not reachable here: give it ours (pip 25.2 is what ansible-core 2.21.5 pins)
mkdir -p ~/.ansible/test/cache
[ -f ~/.ansible/test/cache/get_pip_25_2.py ] || cp lab/bootstrap/get_pip.py ~/.ansible/test/cache/get_pip_25_2.py
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
