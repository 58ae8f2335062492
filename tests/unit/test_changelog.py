"""CHANGELOG.md is what antsibull-changelog makes of changelogs/ (lab/tools/changelog.py):
the fragments pass its lint, a fragment added without making the file again fails the check,
and --write puts the fragment's text into CHANGELOG.md."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / 'lab' / 'tools' / 'changelog.py'


def tool(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                          check=False, timeout=600)


def test_changelog_is_made_from_the_fragments():
    result = tool('--check')
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_new_fragment_fails_the_check_until_written(tmp_path):
    copy = tmp_path / 'collection'
    copy.mkdir()
    for name in ('galaxy.yml', 'CHANGELOG.md'):
        shutil.copy(REPO / name, copy)
    for name in ('changelogs', 'plugins', 'meta'):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns('__pycache__'))
    (copy / 'changelogs' / 'fragments' / 'zz-test.yml').write_text(
        'bugfixes:\n  - A fragment only this test writes.\n', encoding='utf-8')
    assert tool('--check', '--collection', copy).returncode == 1
    written = tool('--write', '--collection', copy)
    assert written.returncode == 0, written.stdout + written.stderr
    assert 'A fragment only this test writes' in (copy / 'CHANGELOG.md').read_text(encoding='utf-8')
    assert tool('--check', '--collection', copy).returncode == 0


def test_a_fragment_of_an_unknown_section_is_refused(tmp_path):
    copy = tmp_path / 'collection'
    shutil.copytree(REPO / 'changelogs', copy / 'changelogs')
    for name in ('galaxy.yml', 'CHANGELOG.md'):
        shutil.copy(REPO / name, copy)
    (copy / 'changelogs' / 'fragments' / 'zz-bad.yml').write_text('fixes:\n  - not a section\n', encoding='utf-8')
    result = tool('--check', '--collection', copy)
    assert result.returncode != 0 and 'fixes' in result.stdout + result.stderr


def test_no_plugin_is_added_after_the_collections_version():
    """A version_added beyond galaxy.yml's version leaves the plugin out of the changelog's New Plugins and New
    Modules (antsibull-changelog lists what the release being made adds)."""
    import re

    import yaml

    version = str(yaml.safe_load((REPO / 'galaxy.yml').read_text(encoding='utf-8'))['version'])

    def key(text):
        return tuple(int(part) for part in text.split('.'))

    later = []
    for path in sorted((REPO / 'plugins').rglob('*')):
        if path.suffix not in ('.py', '.yml') or '__pycache__' in path.parts:
            continue
        for found in re.finditer(r'^\s*version_added:\s*["\']?([0-9.]+)', path.read_text(encoding='utf-8'), re.M):
            if key(found.group(1)) > key(version):
                later.append('%s: %s' % (path.relative_to(REPO), found.group(1)))
    assert later == [], 'galaxy.yml is %s: %s' % (version, later)
