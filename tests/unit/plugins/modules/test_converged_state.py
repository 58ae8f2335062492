"""converged_state: the fingerprint extract.yml keeps after a successful run changes exactly
when something it watches changes; a missing or broken stamp, a changed input, a stopped
unit or an unhealthy server is never taken for converged. The module runs in-process;
systemctl and /health are faked (conftest-free: monkeypatch on the module's names)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.modules import converged_state


def run(args, capsys, check_mode=False):
    with patch_module_args(dict(args, _ansible_check_mode=check_mode)):
        with pytest.raises(SystemExit):
            converged_state.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def server(monkeypatch):
    """The unit's ActiveState and /health's status, as the test sets them."""
    now = {'active': 'active', 'health': 200}
    monkeypatch.setattr(converged_state, 'unit_properties', lambda unit, props: {'ActiveState': now['active']})
    monkeypatch.setattr(converged_state, 'health', lambda url: now['health'])
    return now


def make_site(root):
    (root / 'unit.service').write_text('[Service]\nExecStart=/bin/true\n')
    pkg = root / 'venv' / 'lib' / 'python3.11' / 'site-packages'
    (pkg / 'sglang' / 'srt' / 'models').mkdir(parents=True)
    (pkg / 'sglang' / 'srt' / 'models' / 'deepseek_v2.py').write_text('# patched\n')
    (pkg / 'sglang-0.5.23.dist-info').mkdir()
    (root / 'model').mkdir()
    (root / 'model' / 'model-00001-of-00001.safetensors').write_bytes(b'\0' * 64)
    return pkg


def record(root, capsys, kept=None, **extra):
    stamp = root / 'stamp.json'
    result = run(dict(path=str(stamp), mode='record', unit='x.service', url='http://127.0.0.1:9/health',
                      files=[str(root / 'unit.service'), str(root / 'absent.env')],
                      globs=['%s/venv/lib/python3*/site-packages/sglang/**/*.py' % root],
                      names=['%s/venv/lib/python3*/site-packages/*.dist-info' % root],
                      trees=[str(root / 'model')], inputs='abc', record=kept or {'gpus': '2 x H200'}, **extra),
                 capsys)
    return stamp, result


def check(stamp, capsys, inputs='abc', expect=None):
    return run(dict(path=str(stamp), inputs=inputs, expect=expect or {}), capsys)


def test_record_writes_a_root_only_stamp_once(tmp_path, capsys, server):
    make_site(tmp_path)
    stamp, first = record(tmp_path, capsys)
    assert first['changed'] and stat.S_IMODE(os.stat(stamp).st_mode) == 0o600
    assert json.loads(stamp.read_text())['gpus'] == '2 x H200'
    assert not record(tmp_path, capsys)[1]['changed']
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith('.stamp')) == []


def test_record_in_check_mode_writes_nothing(tmp_path, capsys, server):
    make_site(tmp_path)
    result = run(dict(path=str(tmp_path / 'stamp.json'), mode='record', unit='x.service',
                      url='http://127.0.0.1:9/health'), capsys, check_mode=True)
    assert result['changed'] and not (tmp_path / 'stamp.json').exists()


def test_unchanged_healthy_site_is_converged(tmp_path, capsys, server):
    make_site(tmp_path)
    stamp, recorded = record(tmp_path, capsys)
    now = check(stamp, capsys)
    assert now['converged'] and now['differs'] == [] and now['state'] == recorded['state']
    assert now['stamp']['gpus'] == '2 x H200'


@pytest.mark.parametrize('active, code, says', [
    ('inactive', 200, 'unit'), ('active', 503, 'health'), ('active', None, 'health')])
def test_a_stopped_or_unhealthy_server_is_not_converged(tmp_path, capsys, server, active, code, says):
    make_site(tmp_path)
    stamp, dummy = record(tmp_path, capsys)
    server.update(active=active, health=code)
    now = check(stamp, capsys)
    assert not now['converged'] and now['differs'] == [says]


def test_other_inputs_are_not_converged(tmp_path, capsys, server):
    make_site(tmp_path)
    stamp, dummy = record(tmp_path, capsys)
    now = check(stamp, capsys, inputs='abd', expect={'gpus': '2 x H200'})
    assert not now['converged'] and now['differs'] == ['inputs'] and now['inputs'] == 'abd'
    # the inputs were kept in the stamp by mode=record, beside the record
    assert json.loads(stamp.read_text())['inputs'] == 'abc'


def test_each_watched_change_changes_the_fingerprint(tmp_path, capsys, server):
    pkg = make_site(tmp_path)
    stamp, recorded = record(tmp_path, capsys)
    changes = [
        (tmp_path / 'unit.service', '[Service]\nExecStart=/bin/false\n'),        # a hand edit
        (tmp_path / 'absent.env', 'SGLANG_API_KEY=x\n'),                           # a new key file
        (pkg / 'sglang' / 'srt' / 'models' / 'deepseek_v2.py', '# reverted\n'),   # the patch undone
        (pkg / 'torch-2.9.0.dist-info', None),                                      # one more package
        (tmp_path / 'model' / 'model-00001-of-00001.safetensors', 'short'),        # a truncated shard
    ]
    seen = {recorded['state']}
    for path_changed, text in changes:
        if text is None:
            path_changed.mkdir()
        else:
            path_changed.write_text(text)
        now = check(stamp, capsys)
        assert not now['converged'] and 'files' in now['differs']
        assert now['state'] not in seen
        seen.add(now['state'])


@pytest.mark.parametrize('text', [None, '{"inputs": ', '[]', '{"watch": {"files": "x"}}'])
def test_missing_or_broken_stamp_is_not_converged(tmp_path, capsys, server, text):
    path = tmp_path / 'stamp.json'
    if text is not None:
        path.write_text(text)
    now = check(path, capsys)
    assert now['converged'] is False and now['stamp'] is None and now['differs'] == ['stamp']


@pytest.mark.parametrize('args, says', [
    ({'path': 'relative.json'}, 'absolute'),
    ({'path': '/tmp/x.json', 'mode': 'record', 'url': 'http://x/health'}, 'needs unit'),
    ({'mode': 'check'}, 'missing: path'),
    ({'path': '/tmp/x.json', 'mode': 'record', 'unit': 'x.service', 'url': 'http://x/health',
      'record': {'state': 'forged'}}, "'state'"),
    # the inputs have their own option: the record cannot carry a second copy
    ({'path': '/tmp/x.json', 'mode': 'record', 'unit': 'x.service', 'url': 'http://x/health',
      'record': {'inputs': 'forged'}}, "'inputs'"),
])
def test_bad_options_are_refused(args, says, capsys):
    result = run(args, capsys)
    assert result['failed'] and says in result['msg']


def test_digest_fingerprints_a_file_where_it_runs_with_no_stamp(tmp_path, capsys):
    """A container's configuration on its hypervisor: the record keeps it, the check compares it."""
    conf = tmp_path / '101.conf'
    conf.write_text('memory: 4096\n')
    first = run(dict(mode='digest', files=[str(conf)]), capsys)
    assert first['changed'] is False and len(first['state']) == 64
    assert run(dict(mode='digest', files=[str(conf)]), capsys)['state'] == first['state']
    conf.write_text('memory: 8192\n')
    assert run(dict(mode='digest', files=[str(conf)]), capsys)['state'] != first['state']
    assert not list(tmp_path.glob('*.json'))


def test_a_changed_node_configuration_is_not_converged(tmp_path, capsys, server):
    make_site(tmp_path)
    stamp, dummy = record(tmp_path, capsys, kept={'gpus': '2 x H200', 'node': 'conf-1'})
    assert check(stamp, capsys, expect={'node': 'conf-1'})['converged']
    now = check(stamp, capsys, expect={'node': 'conf-2'})
    assert not now['converged'] and now['differs'] == ['node']


def test_compare_false_reads_nothing_and_hands_the_inputs_on(tmp_path, capsys, server):
    """extract_force, or a container that is not running: the inputs only, for the record."""
    make_site(tmp_path)
    stamp, dummy = record(tmp_path, capsys)
    server.update(active='inactive', health=None)
    now = run(dict(path=str(stamp), inputs='abc', compare=False), capsys)
    assert now['converged'] is False and now['differs'] == ['not compared'] and now['inputs'] == 'abc'


def test_record_watches_what_the_roles_published(tmp_path, capsys, server):
    """deployed (sglang_server_deployed) and python (ml_env_python_bin): the same watch as the files
    named one by one, so a hand edit of the unit or a reverted patch is drift."""
    pkg = make_site(tmp_path)
    (tmp_path / 'venv' / 'bin').mkdir()
    deployed = {'unit': 'x.service', 'url': 'http://127.0.0.1:9', 'unit_file': str(tmp_path / 'unit.service'),
                'config_file': str(tmp_path / 'absent.env'), 'model_path': str(tmp_path / 'model')}
    stamp = tmp_path / 'stamp.json'
    recorded = run(dict(path=str(stamp), mode='record', deployed=deployed, python=str(tmp_path / 'venv' / 'bin' / 'python'),
                        inputs='abc', expect={'ignored': 'at record'}), capsys)
    watch = recorded['stamp']['watch']
    assert watch['unit'] == 'x.service' and watch['url'] == 'http://127.0.0.1:9/health'
    assert watch['files'] == [deployed['unit_file'], deployed['config_file']] and watch['trees'] == [deployed['model_path']]
    # the same state as record()'s files, globs, names and trees given one by one
    assert recorded['state'] == record(tmp_path, capsys)[1]['state']
    assert check(stamp, capsys)['converged']
    (pkg / 'sglang' / 'srt' / 'models' / 'deepseek_v2.py').write_text('# reverted\n')
    assert check(stamp, capsys)['differs'] == ['files']


# -- the extraction job (what the role extraction_job published: extraction_job_deployed) ----------

def make_job(root, states):
    """A job of len(states) shards: its unit file, key file, dataset, each shard's config (its
    output_dir) and status.json in the state given (None: its output dir was removed)."""
    (root / 'job@.service').write_text('[Service]\nExecStart=/bin/job\n')
    (root / 'job.key').write_text('key\n')
    (root / 'data.jsonl').write_text('{"id": "a"}\n')
    job = {'unit_file': str(root / 'job@.service'), 'key_file': str(root / 'job.key'),
           'dataset': str(root / 'data.jsonl'), 'configs': [], 'units': []}
    for index, state in enumerate(states):
        out = root / 'out' / ('shard-%d-of-%d' % (index, len(states)))
        config = root / ('j-shard-%d.json' % index)
        config.write_text(json.dumps({'output_dir': str(out)}))
        job['configs'].append(str(config))
        job['units'].append('job@j-shard-%d.service' % index)
        if state is not None:
            out.mkdir(parents=True)
            status = {'state': state, 'shard_index': index, 'samples_total': 10,
                      'samples_done': 10 if state == 'complete' else 4, 'updated_at': 1}
            if state == 'refused':
                status['last_errors'] = ['refused to start: the shard still has 6 samples ... but %s has 0.1 GiB free'
                                         % out]
            (out / 'status.json').write_text(json.dumps(status))
    return job


@pytest.fixture
def units(monkeypatch):
    """ActiveState by unit (the server's unit and the job's shard units); active unless set."""
    states = {}
    monkeypatch.setattr(converged_state, 'unit_properties',
                        lambda unit, props: {'ActiveState': states.get(unit, 'active')})
    monkeypatch.setattr(converged_state, 'health', lambda url: 200)
    return states


def record_job(root, capsys, job):
    make_site(root)
    return record(root, capsys, job=job)[0]


def test_a_running_or_complete_job_is_converged(tmp_path, capsys, units):
    job = make_job(tmp_path, ['running', 'complete'])
    stamp = record_job(tmp_path, capsys, job)
    units['job@j-shard-1.service'] = 'inactive'   # complete: its unit exited 0
    now = check(stamp, capsys)
    assert now['converged'] and now['differs'] == [] and now['job'] == []


@pytest.mark.parametrize('state, says', [
    ('refused', 'refused to start: the shard still has 6 samples'),   # refused for space, then has space
    (None, 'no status yet'),                                          # its output removed to be redone
    ('incomplete', 'incomplete'),                                      # stopped by hand half way
])
def test_a_job_neither_running_nor_complete_is_not_converged(tmp_path, capsys, units, state, says):
    """The re-run must start it again: the host is not left alone, and the check says which shard and why."""
    job = make_job(tmp_path, ['complete', 'complete'])
    stamp = record_job(tmp_path, capsys, job)
    units['job@j-shard-0.service'] = units['job@j-shard-1.service'] = 'inactive'
    assert check(stamp, capsys)['converged']
    shard = tmp_path / 'out' / 'shard-1-of-2'
    for name in os.listdir(shard):
        os.unlink(shard / name)
    os.rmdir(shard)
    if state is not None:
        (tmp_path / 'again').mkdir()
        make_job(tmp_path / 'again', [state, state])
        os.rename(tmp_path / 'again' / 'out' / 'shard-1-of-2', shard)
    now = check(stamp, capsys)
    assert not now['converged'] and now['differs'] == ['job']
    assert len(now['job']) == 1 and now['job'][0].startswith('job@j-shard-1.service') and says in now['job'][0]


def test_the_job_files_are_watched_by_content(tmp_path, capsys, units):
    """A shard's config, the unit file, the key file and the dataset on the host, each edited by hand."""
    job = make_job(tmp_path, ['running'])
    stamp = record_job(tmp_path, capsys, job)
    assert check(stamp, capsys)['converged']
    for path in (job['configs'][0], job['unit_file'], job['key_file'], job['dataset']):
        with open(path, 'a') as handle:
            handle.write(' ')
        now = check(stamp, capsys)
        assert not now['converged'] and now['differs'] == ['files'], path
