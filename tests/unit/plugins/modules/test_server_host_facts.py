"""server_host_facts: the model dir's files and shards, the dump dir's filesystem, against
real directories (the shards of lab/fixtures/model) and a written mountinfo."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.modules import server_host_facts

FIXTURE_MODEL = Path(__file__).resolve().parents[4] / 'lab' / 'fixtures' / 'model'
SHARDS = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            server_host_facts.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def model(tmp_path):
    dest = tmp_path / 'model'
    shutil.copytree(FIXTURE_MODEL, dest)
    return dest


def test_a_complete_model_and_an_existing_dump_dir(model, tmp_path, capsys):
    result = run({'model_path': str(model), 'dump_dir': str(tmp_path)}, capsys)
    assert not result['changed']
    assert result['model'] == {'missing_files': [], 'index_error': None, 'shards_listed': SHARDS,
                               'shards_missing': []}
    assert result['dump_dir']['exists'] and result['dump_dir']['checked'] == str(tmp_path)
    assert result['dump_dir']['fstype'] and result['dump_dir']['avail_bytes'] > 0


def test_a_missing_shard_is_named(model, tmp_path, capsys):
    (model / SHARDS[1]).unlink()
    result = run({'model_path': str(model), 'dump_dir': str(tmp_path)}, capsys)
    assert result['model']['shards_missing'] == [SHARDS[1]]


def test_missing_files_and_a_broken_index(model, tmp_path, capsys):
    (model / 'config.json').unlink()
    (model / 'model.safetensors.index.json').write_text('{"weight_map": ')
    result = run({'model_path': str(model), 'dump_dir': str(tmp_path)}, capsys)
    assert result['model']['missing_files'] == ['config.json']
    assert result['model']['index_error'].startswith(str(model / 'model.safetensors.index.json'))
    empty = run({'model_path': str(tmp_path / 'none'), 'dump_dir': str(tmp_path)}, capsys)
    assert empty['model']['missing_files'] == ['config.json', 'model.safetensors.index.json']


def test_a_dump_dir_not_made_yet_reads_its_parent(tmp_path, capsys):
    result = run({'model_path': str(tmp_path), 'dump_dir': str(tmp_path / 'a' / 'b')}, capsys)
    assert not result['dump_dir']['exists'] and result['dump_dir']['checked'] == str(tmp_path)


def test_filesystem_type_is_the_nearest_mount(tmp_path):
    info = tmp_path / 'mountinfo'
    info.write_text(
        '22 1 8:1 / / rw - ext4 /dev/sda1 rw\n'
        '30 22 0:25 / /dev/shm rw - tmpfs tmpfs rw\n'
        '31 22 0:26 / /dev/shm/my\\040dir rw - ramfs none rw\n'
        '32 22 0:27 / /dev/shmx rw - xfs none rw\n')
    assert server_host_facts.filesystem_type('/dev/shm/dumps', str(info)) == 'tmpfs'
    assert server_host_facts.filesystem_type('/dev/shm', str(info)) == 'tmpfs'
    assert server_host_facts.filesystem_type('/dev/shm/my dir/x', str(info)) == 'ramfs'
    assert server_host_facts.filesystem_type('/dev/shmx/a', str(info)) == 'xfs'
    assert server_host_facts.filesystem_type('/srv', str(info)) == 'ext4'


@pytest.mark.parametrize('args', [{'model_path': 'models/x', 'dump_dir': '/dev/shm/d'},
                                  {'model_path': '/srv/m', 'dump_dir': '/dev/shm/d\nx'}])
def test_bad_paths_are_refused(args, capsys):
    result = run(args, capsys)
    assert result['failed'] and 'is not an absolute path' in result['msg']


def test_require_fails_naming_the_variable_and_the_missing_shard(model, capsys):
    (model / SHARDS[1]).unlink()
    result = run({'model_path': str(model), 'dump_dir': '/dev/shm', 'require': True}, capsys)
    assert result['failed'] and result['msg'] == (
        'sglang_server: sglang_server_model_path=%s: model.safetensors.index.json lists 2 shards; missing: %s'
        % (model, SHARDS[1]))
    (model / 'config.json').unlink()
    assert run({'model_path': str(model), 'dump_dir': '/dev/shm', 'require': True}, capsys)['msg'] == (
        'sglang_server: sglang_server_model_path=%s lacks config.json' % model)


def test_require_fails_on_a_dump_dir_off_tmpfs_or_short_of_room(model, tmp_path, capsys):
    facts = run({'model_path': str(model), 'dump_dir': '/dev/shm'}, capsys)['dump_dir']
    assert server_host_facts.dump_problem('/dev/shm/d', facts, 0.5) is None or facts['fstype'] != 'tmpfs'
    disk = dict(facts, fstype='ext4', avail_bytes=3 * 1073741824)
    assert server_host_facts.dump_problem('/srv/d', disk, 0.5) == (
        'sglang_server: sglang_server_dump_dir=/srv/d is on ext4 with 3.0 GiB free; it must be on a tmpfs with at '
        'least sglang_server_shm_min_free_gib=0.5 GiB free')
    small = dict(facts, fstype='tmpfs', avail_bytes=1073741824)
    assert 'with 1.0 GiB free' in server_host_facts.dump_problem('/dev/shm/d', small, 2.0)
    assert server_host_facts.dump_problem('/dev/shm/d', small, 1.0) is None
    # without require the same host only reads
    assert not run({'model_path': str(tmp_path / 'none'), 'dump_dir': '/srv'}, capsys).get('failed')
