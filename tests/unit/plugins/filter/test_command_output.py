"""The filters that read command output for the tasks: systemd_unit_names (extraction_job's stop) and
proc_devices (proxmox_container's preflight)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.command_output import (
    FilterModule, last_line, pip_would_install, proc_devices, systemd_unit_names)

FIXTURES = Path(__file__).resolve().parents[4] / 'lab' / 'fixtures' / 'nvidia-smi' / 'h200x2' / 'idle'


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {'systemd_unit_names', 'proc_devices', 'last_line',
                                             'pip_would_install'}


def test_unit_names_are_the_first_column_in_systemctls_order():
    stdout = ('extraction-job@1.service loaded active running eagle3 extraction job, shard 1\n'
              '\n'
              'extraction-job@0.service loaded activating start-pre eagle3 extraction job, shard 0\n')
    assert systemd_unit_names(stdout) == ['extraction-job@1.service', 'extraction-job@0.service']


def test_a_status_mark_before_the_name_is_skipped():
    assert systemd_unit_names('\u25cf extraction-job@2.service loaded failed failed job\n') == [
        'extraction-job@2.service']


def test_with_running_only_the_units_that_run_or_are_about_to():
    # systemctl list-units --all: every loaded shard unit; the filter, not systemctl, says which run
    stdout = ('extraction-job@0.service loaded active running eagle3 extraction job, shard 0\n'
              'extraction-job@1.service loaded activating auto-restart eagle3 extraction job, shard 1\n'
              'extraction-job@2.service loaded inactive dead eagle3 extraction job, shard 2\n'
              '\u25cf extraction-job@3.service loaded failed failed eagle3 extraction job, shard 3\n'
              'extraction-job@4.service loaded reloading reload eagle3 extraction job, shard 4\n'
              'extraction-job@5.service not-found inactive dead extraction-job@5.service\n'
              'extraction-job@6.service loaded deactivating stop-sigterm eagle3 extraction job, shard 6\n')
    assert systemd_unit_names(stdout, running=True) == [
        'extraction-job@0.service', 'extraction-job@1.service', 'extraction-job@4.service']
    assert len(systemd_unit_names(stdout)) == 7


def test_a_line_without_its_active_column_is_not_running():
    assert systemd_unit_names('extraction-job@0.service loaded\n', running=True) == []


def test_no_unit_is_an_empty_list():
    assert systemd_unit_names('') == []


def test_a_result_instead_of_its_stdout_is_refused():
    with pytest.raises(AnsibleFilterError, match='stdout'):
        systemd_unit_names({'stdout': ''})


PROC_DEVICES = """Character devices:
  1 mem
  4 /dev/vc/0
195 nvidia
195 nvidiactl
238 nvidia-uvm
241 nvidia-caps

Block devices:
  8 sd
259 blkext
"""


def test_majors_by_section_and_name():
    found = proc_devices(PROC_DEVICES)
    assert found['character'] == {'mem': 1, '/dev/vc/0': 4, 'nvidia': 195, 'nvidiactl': 195, 'nvidia-uvm': 238,
                                  'nvidia-caps': 241}
    assert found['block'] == {'sd': 8, 'blkext': 259}


def test_the_h200_hosts_nvidia_majors():
    lines = (FIXTURES / 'proc-devices-nvidia.txt').read_text()
    character = proc_devices('Character devices:\n' + lines + '\nBlock devices:\n')['character']
    assert character['nvidia'] == 195 and character['nvidia-uvm'] == 238


def test_no_driver_loaded_has_no_nvidia_major():
    found = proc_devices('Character devices:\n  1 mem\n\nBlock devices:\n  8 sd\n')
    assert 'nvidia' not in found['character'] and 'nvidia-uvm' not in found['character']


def test_a_name_in_the_block_section_is_no_character_device():
    assert proc_devices('Character devices:\n\nBlock devices:\n195 nvidia\n')['character'] == {}


def test_the_last_line_is_what_a_failing_interpreter_said_last():
    stderr = 'Traceback (most recent call last):\n  File "<stdin>", line 1\n/bin/sh: 1: /usr/bin/py3: not found\n\n'
    assert last_line(stderr) == '/bin/sh: 1: /usr/bin/py3: not found'


def test_no_line_is_empty():
    assert last_line('') == '' and last_line(' \n\n') == ''


def test_what_pip_would_install():
    stdout = ('Looking in links: /srv/wheelhouse\n'
              'Requirement already satisfied: numpy==2.1.3 in /root/ml-env/lib/python3.12/site-packages (2.1.3)\n'
              'Collecting orjson==3.10.12 (from -r /root/ml-env/requirements.txt (line 2))\n'
              'Would install orjson-3.10.12 uvloop-0.21.0\n')
    assert pip_would_install(stdout) == ['orjson-3.10.12', 'uvloop-0.21.0']


def test_pip_would_install_nothing_when_all_is_satisfied():
    stdout = 'Requirement already satisfied: numpy==2.1.3 in /root/ml-env/lib/python3.12/site-packages (2.1.3)\n'
    assert pip_would_install(stdout) == []
