"""playbooks/files/converged_probe.py: the fingerprint extract.yml keeps after a successful
run changes exactly when something it watches changes."""

import json
import os
import subprocess
import sys

PROBE = os.path.join(os.path.dirname(__file__), '..', '..', 'playbooks', 'files', 'converged_probe.py')


def probe(*args):
    out = subprocess.run([sys.executable, PROBE] + list(args), capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def make_site(root):
    (root / 'unit.service').write_text('[Service]\nExecStart=/bin/true\n')
    pkg = root / 'venv' / 'lib' / 'python3.11' / 'site-packages'
    (pkg / 'sglang' / 'srt' / 'models').mkdir(parents=True)
    (pkg / 'sglang' / 'srt' / 'models' / 'deepseek_v2.py').write_text('# patched\n')
    (pkg / 'sglang-0.5.23.dist-info').mkdir()
    (root / 'model').mkdir()
    (root / 'model' / 'model-00001-of-00001.safetensors').write_bytes(b'\0' * 64)
    return pkg


def stamp_for(root, tmp_path):
    body = probe('measure', '--unit=x.service', '--url=http://127.0.0.1:9/health',
                 '--file=%s' % (root / 'unit.service'), '--file=%s' % (root / 'absent.env'),
                 '--glob=%s/venv/lib/python3*/site-packages/sglang/**/*.py' % root,
                 '--names=%s/venv/lib/python3*/site-packages/*.dist-info' % root,
                 '--tree=%s' % (root / 'model'))
    path = tmp_path / 'stamp.json'
    path.write_text(json.dumps(body))
    return path, body


def test_unchanged_site_has_the_recorded_fingerprint(tmp_path):
    make_site(tmp_path)
    path, body = stamp_for(tmp_path, tmp_path)
    now = probe('check', '--stamp=%s' % path)
    assert now['stamp'] == body and now['state'] == body['state']
    # nothing listens on port 9: no health; the unit does not exist
    assert now['health'] is None and now['active'] in ('', 'inactive')


def test_each_watched_change_changes_the_fingerprint(tmp_path):
    pkg = make_site(tmp_path)
    path, body = stamp_for(tmp_path, tmp_path)
    changes = [
        (tmp_path / 'unit.service', '[Service]\nExecStart=/bin/false\n'),        # a hand edit
        (tmp_path / 'absent.env', 'SGLANG_API_KEY=x\n'),                           # a new key file
        (pkg / 'sglang' / 'srt' / 'models' / 'deepseek_v2.py', '# reverted\n'),   # the patch undone
        (pkg / 'torch-2.9.0.dist-info', None),                                      # one more package
        (tmp_path / 'model' / 'model-00001-of-00001.safetensors', 'short'),        # a truncated shard
    ]
    seen = {body['state']}
    for path_changed, text in changes:
        if text is None:
            path_changed.mkdir()
        else:
            path_changed.write_text(text)
        state = probe('check', '--stamp=%s' % path)['state']
        assert state not in seen
        seen.add(state)


def test_missing_or_broken_stamp_is_no_stamp(tmp_path):
    assert probe('check', '--stamp=%s' % (tmp_path / 'none.json')) == {'stamp': None}
    (tmp_path / 'broken.json').write_text('{"inputs": ')
    assert probe('check', '--stamp=%s' % (tmp_path / 'broken.json')) == {'stamp': None}
