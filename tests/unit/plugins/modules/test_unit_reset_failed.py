"""unit_reset_failed: the one place `systemctl reset-failed` runs. It reads the unit first and resets a
loaded unit that failed (or, with start_count, any loaded one: its start count), never one systemd has
not loaded (systemd would refuse it); changed only when the unit was failed; nothing runs in check mode.
A systemctl on PATH plays systemd: it answers `show` from a state file and records every reset."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.modules import unit_reset_failed

SYSTEMCTL = '''#!/bin/sh
if [ "$1" = show ]; then cat "%(state)s"; exit 0; fi
echo "$*" >> "%(log)s"
exit "$(cat "%(rc)s")"
'''


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """Set the unit's states with systemd(load, active); read the resets from systemd.resets()."""
    paths = dict(state=tmp_path / 'state', log=tmp_path / 'log', rc=tmp_path / 'rc')
    paths['log'].write_text('')
    paths['rc'].write_text('0')
    (tmp_path / 'systemctl').write_text(SYSTEMCTL % paths)
    (tmp_path / 'systemctl').chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (tmp_path, os.environ['PATH']))

    class Systemd:
        def __call__(self, load, active, rc=0):
            paths['state'].write_text('LoadState=%s\nActiveState=%s\n' % (load, active))
            paths['rc'].write_text(str(rc))

        def resets(self):
            return paths['log'].read_text().splitlines()
    return Systemd()


def run(args, capsys, check_mode=False):
    args = dict({'unit': 'sglang-extraction.service'}, **args)
    if check_mode:
        args['_ansible_check_mode'] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            unit_reset_failed.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize('load, active, start_count, reset, changed', [
    ('loaded', 'failed', False, True, True),
    ('loaded', 'inactive', False, False, False),
    ('loaded', 'active', False, False, False),
    ('loaded', 'inactive', True, True, False),     # the start count only: nothing a user sees changes
    ('loaded', 'failed', True, True, True),
    ('not-found', 'inactive', True, False, False),  # systemd refuses reset-failed for a unit it has not loaded
    ('', '', True, False, False),                   # systemctl could not say
])
def test_the_reset_runs_where_systemd_keeps_a_failed_state(systemd, capsys, load, active, start_count, reset, changed):
    systemd(load, active)
    result = run({'start_count': start_count}, capsys)
    assert (result['reset'], result['changed']) == (reset, changed) and not result.get('failed')
    assert systemd.resets() == (['reset-failed -- sglang-extraction.service'] if reset else [])


def test_check_mode_says_what_it_would_do_and_runs_nothing(systemd, capsys):
    systemd('loaded', 'failed')
    result = run({}, capsys, check_mode=True)
    assert result['reset'] and result['changed'] and systemd.resets() == []


def test_a_reset_systemd_refuses_fails_naming_the_command(systemd, capsys):
    systemd('loaded', 'failed', rc=1)
    result = run({}, capsys)
    assert result['failed'] and result['msg'].startswith('systemctl reset-failed -- sglang-extraction.service failed')


@pytest.mark.parametrize('unit', ['sglang-extraction', 'a b.service', 'x.service\n', '-x.service; reboot'])
def test_a_unit_that_is_no_service_name_is_refused_before_anything_runs(systemd, capsys, unit):
    systemd('loaded', 'failed')
    result = run({'unit': unit}, capsys)
    assert result['failed'] and 'unit=' in result['msg'] and systemd.resets() == []
