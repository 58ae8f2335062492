"""sglang_source_patch against the real deepseek_v2.py of every sglang version the
sglang_patch role ships a patch for (tests/patch/sglang_source.py downloads the wheel once):
pristine -> patched -> unchanged -> pristine, check mode, the whole diff, and refusals that
leave the file byte for byte as it was (an edited file, an anchor that is not unique, a
result with the wrong checksum, one that does not compile). The module runs in-process."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.modules import sglang_source_patch

REPO = Path(__file__).resolve().parents[4]
# the download and unpacking of sglang's wheel, shared with tests/patch and tests/capture
_spec = importlib.util.spec_from_file_location('sglang_source', REPO / 'tests' / 'patch' / 'sglang_source.py')
sglang_source = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sglang_source)

VERSIONS = sglang_source.supported_versions()
MEMBER = 'sglang/srt/models/deepseek_v2.py'


def run(args, capsys, check_mode=False, diff=False):
    args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            sglang_source_patch.main()
    return json.loads(capsys.readouterr().out)


def module_args(spec, path, state='present', **extra):
    return dict(path=str(path), state=state, pristine_sha256=spec['pristine_sha256'],
                patched_sha256=spec['patched_sha256'], insertions=spec['insertions'], **extra)


@pytest.fixture(params=VERSIONS)
def pristine(request, tmp_path):
    """(version's spec, a copy of its real pristine deepseek_v2.py)"""
    version = request.param
    target = tmp_path / 'models' / 'deepseek_v2.py'
    target.parent.mkdir()
    shutil.copyfile(sglang_source.extract(version, MEMBER), target)
    target.chmod(0o644)
    return sglang_source.spec(version), target


def digest(path):
    return sglang_source.sha256(Path(path).read_text(encoding='utf-8'))


def test_patch_then_unchanged_then_restore(pristine, capsys):
    spec, target = pristine
    first = run(module_args(spec, target), capsys)
    assert first['changed'] and first['found'] == 'pristine'
    assert digest(target) == spec['patched_sha256'] == first['sha256_after']
    assert 'eagle3_hs_capture.install(self)' in target.read_text()
    assert oct(target.stat().st_mode & 0o777) == '0o644'
    assert [p.name for p in target.parent.iterdir()] == ['deepseek_v2.py']  # no temporary file left

    again = run(module_args(spec, target), capsys)
    assert not again['changed'] and again['found'] == 'patched'

    restored = run(module_args(spec, target, state='absent'), capsys)
    assert restored['changed'] and restored['found'] == 'patched'
    assert digest(target) == spec['pristine_sha256']
    assert not run(module_args(spec, target, state='absent'), capsys)['changed']


def test_check_mode_returns_the_whole_diff_and_writes_nothing(pristine, capsys):
    spec, target = pristine
    result = run(module_args(spec, target), capsys, check_mode=True, diff=True)
    assert result['changed'] and digest(target) == spec['pristine_sha256']
    diff = result['diff']['prepared'].splitlines()
    added = [line for line in diff if line.startswith('+') and not line.startswith('+++ ')]
    removed = [line for line in diff if line.startswith('-') and not line.startswith('--- ')]
    assert len(added) == 8 and removed == []
    assert '+        self._eagle3_hs_capture = eagle3_hs_capture.install(self)' in added
    # the file is over ansible's 100 KiB max_diff_size: the diff is still there
    assert target.stat().st_size > 100 * 1024


def test_backup_keeps_the_pristine_file(pristine, capsys):
    spec, target = pristine
    result = run(module_args(spec, target, backup=True), capsys)
    assert digest(result['backup_file']) == spec['pristine_sha256']
    assert os.path.dirname(result['backup_file']) == str(target.parent)


def test_an_edited_file_is_refused_naming_it_and_left_alone(pristine, capsys):
    """The safety behaviour: a hand-edited deepseek_v2.py is never overwritten, in either state."""
    spec, target = pristine
    target.write_text(target.read_text() + '# a local edit\n', encoding='utf-8')
    before = target.read_bytes()
    for state in ('present', 'absent'):
        for check_mode in (True, False):
            result = run(module_args(spec, target, state=state, backup=True), capsys, check_mode=check_mode)
            assert result['failed']
            assert str(target) in result['msg'] and 'it was edited (sha256 %s)' % digest(target) in result['msg']
            assert 'Nothing was changed' in result['msg']
            assert target.read_bytes() == before
    assert [p.name for p in target.parent.iterdir()] == ['deepseek_v2.py']  # no backup either


def test_an_anchor_that_is_not_unique_is_refused(pristine, capsys):
    spec, target = pristine
    anchor = spec['insertions'][0]['after']
    text = target.read_text().replace(anchor, anchor + anchor, 1)
    target.write_text(text, encoding='utf-8')
    # the spec of this doubled file, so that only the anchor rule can refuse it
    doubled = dict(spec, pristine_sha256=sglang_source.sha256(text))
    result = run(module_args(doubled, target), capsys)
    assert result['failed'] and 'occurs 2 times' in result['msg']
    assert target.read_text() == text


def test_a_result_with_another_checksum_is_refused(pristine, capsys):
    spec, target = pristine
    wrong = dict(spec, patched_sha256='0' * 64)
    result = run(module_args(wrong, target), capsys)
    assert result['failed'] and 'not ' + '0' * 64 in result['msg']
    assert digest(target) == spec['pristine_sha256']


def test_a_result_that_does_not_compile_is_refused(pristine, capsys):
    spec, target = pristine
    broken = [dict(spec['insertions'][0], text='def broken(:\n')]
    new = sglang_source_patch.insert(target.read_text(), broken)
    result = run(dict(module_args(spec, target), insertions=broken,
                      patched_sha256=sglang_source.sha256(new)), capsys)
    assert result['failed'] and 'does not compile' in result['msg']
    assert digest(target) == spec['pristine_sha256']


@pytest.mark.parametrize('bad, says', [
    ({'pristine_sha256': 'abc'}, 'pristine_sha256'),
    ({'patched_sha256': 'F' * 64}, 'patched_sha256'),
    ({'path': 'relative/deepseek_v2.py'}, 'absolute'),
    ({'insertions': [{'after': 'two\nlines\n', 'text': 'x = 1\n'}]}, 'insertions[0].after'),
    ({'insertions': [{'after': 'no newline', 'text': 'x = 1\n'}]}, 'insertions[0].after'),
    ({'insertions': [{'after': 'a\n', 'text': 'x = 1'}]}, 'insertions[0].text'),
    ({'insertions': [{'after': 'a\n', 'text': 'x = 1\n', 'indent': -1}]}, 'insertions[0].indent'),
])
def test_bad_options_are_refused_before_the_file_is_read(bad, says, pristine, capsys):
    spec, target = pristine
    result = run(dict(module_args(spec, target), **bad), capsys)
    assert result['failed'] and says in result['msg']
    assert digest(target) == spec['pristine_sha256']


def test_a_missing_file_is_named(tmp_path, capsys):
    spec = sglang_source.spec(VERSIONS[-1])
    result = run(module_args(spec, tmp_path / 'deepseek_v2.py'), capsys)
    assert result['failed'] and str(tmp_path / 'deepseek_v2.py') in result['msg']
