# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CHANGELOG.md, made by antsibull-changelog from changelogs/ (never edited by hand).

A change is described by a fragment, changelogs/fragments/<name>.yml (sections: major_changes,
minor_changes, bugfixes, ...; RST markup). Until a version is released, CHANGELOG.md shows the
release the fragments would make of galaxy.yml's version: this tool runs `antsibull-changelog
release` on a copy of the collection (the checkout keeps its fragments) and takes the copy's
CHANGELOG.md. At a real release, run `antsibull-changelog release` in the checkout itself.

    python lab/tools/changelog.py --check     # lint the fragments; exit 1 if CHANGELOG.md differs
    python lab/tools/changelog.py --write     # make CHANGELOG.md again
"""
import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# what antsibull-changelog reads: the collection's identity, the changelog, the plugins it lists as new
NEEDED = ('galaxy.yml', 'changelogs', 'plugins', 'meta')
# any fixed date: the Markdown output shows none, and the copy's changelog.yaml is thrown away
DATE = '1970-01-01'


def antsibull(args, cwd):
    """antsibull-changelog from the interpreter's own venv (it runs ansible-doc from there too)."""
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get('PATH', ''), ANSIBLE_NOCOLOR='1')
    result = subprocess.run([os.path.join(bindir, 'antsibull-changelog'), *args], cwd=cwd, env=env,
                            capture_output=True, text=True, check=False, timeout=300)
    if result.returncode != 0:
        sys.exit('antsibull-changelog %s: %s%s' % (' '.join(args), result.stdout, result.stderr))
    return result.stdout


def made(collection):
    """The CHANGELOG.md that the fragments make of galaxy.yml's version."""
    with open(os.path.join(collection, 'galaxy.yml'), encoding='utf-8') as f:
        version = yaml.safe_load(f)['version']
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'ansible_collections', 'eagle3', 'extraction')
        for name in NEEDED:
            source = os.path.join(collection, name)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(copy, name), ignore=shutil.ignore_patterns('__pycache__'))
            else:
                os.makedirs(copy, exist_ok=True)
                shutil.copy(source, copy)
        antsibull(['release', '--version', str(version), '--date', DATE], cwd=copy)
        with open(os.path.join(copy, 'CHANGELOG.md'), encoding='utf-8') as f:
            return f.read()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--collection', default=COLLECTION)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument('--check', action='store_true')
    mode.add_argument('--write', action='store_true')
    args = parser.parse_args(argv)
    antsibull(['lint'], cwd=args.collection)
    text = made(args.collection)
    path = os.path.join(args.collection, 'CHANGELOG.md')
    if args.write:
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
        return 0
    with open(path, encoding='utf-8') as f:
        current = f.read()
    if current == text:
        return 0
    sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True), path, 'made'))
    print('\n%s differs from the fragments: run python lab/tools/changelog.py --write' % path)
    return 1


if __name__ == '__main__':
    sys.exit(main())
