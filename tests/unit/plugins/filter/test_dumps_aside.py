"""The name a dump dir is moved aside to, and the glob the extraction job drains them by: one contract
(module_utils/dumps.py), read by the sglang_server role (filter dumps_aside) and the extraction_job role
(filter dumps_aside_glob, into the job's config)."""

from __future__ import annotations

import ast
import datetime
import fnmatch
import glob
import os
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.dumps_aside import FilterModule, dumps_aside, dumps_aside_glob
from ansible_collections.eagle3.extraction.plugins.module_utils import dumps

REPO = Path(__file__).resolve().parents[4]
WHEN = datetime.datetime(2026, 12, 2, 14, 30, 5, tzinfo=datetime.timezone.utc)


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {'dumps_aside', 'dumps_aside_glob'}


def test_the_dated_dir_next_to_the_dump_dir():
    assert dumps_aside('/dev/shm/sglang_hs', WHEN) == '/dev/shm/sglang_hs.undrained-20261202T143005Z'
    assert dumps_aside('/dev/shm/sglang_hs/', '20261202T143005Z') == '/dev/shm/sglang_hs.undrained-20261202T143005Z'


def test_a_time_elsewhere_is_written_in_utc():
    paris = WHEN.astimezone(datetime.timezone(datetime.timedelta(hours=1)))
    assert dumps_aside('/dev/shm/x', paris) == '/dev/shm/x.undrained-20261202T143005Z'


def test_the_glob_matches_the_names_given_not_the_dump_dir():
    pattern = dumps_aside_glob('/dev/shm/sglang_hs')
    assert fnmatch.fnmatchcase(dumps_aside('/dev/shm/sglang_hs', WHEN), pattern)
    assert not fnmatch.fnmatchcase('/dev/shm/sglang_hs', pattern)


def test_the_glob_finds_the_dirs_on_disk(tmp_path):
    dump_dir = str(tmp_path / 'sh[m]*' / 'sglang_hs')  # its own glob characters are escaped
    os.makedirs(dump_dir)
    aside = dumps_aside(dump_dir, WHEN)
    os.makedirs(aside)
    os.makedirs(dump_dir + '-other')
    assert glob.glob(dumps_aside_glob(dump_dir)) == [aside]


def test_bad_inputs_are_refused():
    with pytest.raises(AnsibleFilterError, match='absolute path'):
        dumps_aside('sglang_hs', WHEN)
    with pytest.raises(AnsibleFilterError, match='datetime'):
        dumps_aside('/dev/shm/x', '2026-12-02 14:30')
    with pytest.raises(AnsibleFilterError, match='absolute path'):
        dumps_aside_glob(None)


def without_documentation(source):
    """A variable record file's source less its prose: descriptions, comments, an entry point's short description."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            node.keywords = [keyword for keyword in node.keywords if keyword.arg not in ('description', 'comment')]
            if getattr(node.func, 'id', None) == 'EntryPoint':
                node.args = node.args[:1]
    return ast.unparse(tree)


def test_no_task_template_or_job_module_writes_the_name():
    """The contract's name is written in module_utils/dumps.py only (documentation may name it)."""
    offenders = []
    for pattern in ('roles/*/tasks/*.yml', 'roles/*/vars/*.yml', 'roles/*/defaults/*.yml', 'roles/*/templates/*',
                    'playbooks/**/*.yml', 'roles/extraction_job/files/eagle3_extraction_job/*.py',
                    'plugins/**/*.py'):
        for path in REPO.glob(pattern):
            text = path.read_text()
            if path.suffix == '.yml':
                text = yaml.safe_dump(yaml.safe_load(text))  # comments are documentation
            if path.parent.name == 'role_variables':
                text = without_documentation(text)  # a record's description and comment are documentation
            if dumps.ASIDE in text and path != REPO / 'plugins' / 'module_utils' / 'dumps.py':
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []
