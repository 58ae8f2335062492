# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/shard_layout: the shard dir's name, made by one function and read back by one. The plan
names each shard's dir with it, and status, verify, repair and the dataset check find exactly those dirs:
a layout renamed in one place only fails here at once, instead of every shard being lost to them."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import pytest

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import (
    SHARD_DIR_PREFIX, shard_dir_name, shard_dirs, shard_of_dir_name)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import plan

REPO = Path(__file__).resolve().parents[4]
# a name written again in the layout's own shape: a string that starts as the layout's names do, then a
# % or {} field (shard-%s-of-%s, 'shard-{}'...)
WRITTEN_AGAIN = re.compile(r'''['"]%s(%%|\{)''' % re.escape(SHARD_DIR_PREFIX))


@pytest.mark.parametrize('index, count', [(0, 1), (2, 3), (9, 10), (11, 128)])
def test_a_name_reads_back_to_its_shard(index, count):
    assert shard_of_dir_name(shard_dir_name(index, count)) == (index, count)


@pytest.mark.parametrize('name', ['shard-1b-of-3', 'shard-01-of-3', 'shard-1-of-3.bak', 'other-1-of-3', 'shard-1',
                                  'shard--1-of-3', ''])
def test_a_name_the_layout_does_not_make_reads_back_to_none(name):
    assert shard_of_dir_name(name) is None


def test_the_dirs_the_plan_names_are_the_dirs_status_verify_and_repair_find(tmp_path):
    # a rename of the layout in the plan only (or in the readers only) fails here
    hosts = {'ct%d' % n: {'sglang_server_name': 'server%d' % n, 'extraction_job_name': 'demo',
                          'extraction_job_output_root': str(tmp_path)} for n in range(3)}
    job_dir, made = None, {}
    for host in hosts:
        job = plan(hosts, host)['job']
        job_dir = job['dir']
        for index, path in job['output_dirs'].items():
            assert posixpath.dirname(path) == job_dir
            made[path] = (int(index), job['shard_count'])
            Path(path).mkdir(parents=True)
    assert len(made) == 3
    found = shard_dirs(job_dir)
    assert sorted(found) == sorted(made)
    assert dict((path, shard_of_dir_name(posixpath.basename(path))) for path in found) == made


def test_a_file_or_another_dir_beside_the_shards_is_no_shard(tmp_path):
    (tmp_path / shard_dir_name(0, 2)).mkdir()
    (tmp_path / shard_dir_name(1, 2)).write_text('a file, not a dir')
    (tmp_path / 'damaged').mkdir()
    assert shard_dirs(str(tmp_path)) == [str(tmp_path / shard_dir_name(0, 2))]
    assert shard_dirs(str(tmp_path / 'no such job')) == []


def test_no_other_file_writes_the_layout_again():
    sources = [p for pattern in ('plugins/**/*.py', 'roles/**/*.yml', 'roles/**/*.j2', 'roles/**/*.py',
                                 'playbooks/**/*.yml') for p in REPO.glob(pattern)]
    offenders = [str(p.relative_to(REPO)) for p in sources
                 if p.name != 'shard_layout.py' and WRITTEN_AGAIN.search(p.read_text(encoding='utf-8'))]
    assert offenders == []
