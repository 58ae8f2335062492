"""A real Mooncake master and segment holder on this machine, started with the command lines the role's units
hold (plugin_utils/mooncake_address.commands) on free ports: mooncake_health is not up before the segment is
mounted, then up with the segment's capacity, advertising the address given. Needs the torch venv's Mooncake
(lab/bootstrap/torch-venv.sh installs mooncake-transfer-engine-non-cuda); skipped without it."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest
from ansible_collections.eagle3.extraction.plugins.modules import mooncake_health
from ansible_collections.eagle3.extraction.plugins.plugin_utils.mooncake_address import commands

REPO = pathlib.Path(__file__).resolve().parents[2]
VENV = REPO / '.venv-torch'
SEGMENT = 64 << 20

pytestmark = pytest.mark.skipif(not (VENV / 'bin' / 'mooncake_master').exists(),
                                reason='no Mooncake in .venv-torch (lab/bootstrap/torch-venv.sh)')


def free_ports(count):
    sockets = [socket.socket() for _port in range(count)]
    try:
        for item in sockets:
            item.bind(('127.0.0.1', 0))
        return [item.getsockname()[1] for item in sockets]
    finally:
        for item in sockets:
            item.close()


def start(argv, log, environment=None):
    # a session of its own: the test kills the whole group, whatever the entry script started
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, **(environment or {})))


def stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture
def plan():
    rpc, metadata, metrics, segment = free_ports(4)
    return commands('master', {
        'mooncake_master_host': '127.0.0.1', 'mooncake_master_venv': str(VENV),
        'mooncake_master_rpc_port': rpc, 'mooncake_master_metadata_port': metadata,
        'mooncake_master_metrics_port': metrics, 'mooncake_master_segment_port': segment,
        'mooncake_master_segment_bytes': SEGMENT, 'mooncake_master_kv_lease_ms': 10000})


def params(plan, timeout):
    return {'metrics_url': plan['metrics_url'], 'metadata_server': plan['metadata_server'],
            'segment_bytes': SEGMENT, 'advertised': plan['host'], 'units': [], 'timeout': timeout, 'require': True}


def test_the_units_command_lines_bring_the_store_up_with_its_segment(plan, tmp_path):
    processes = []
    try:
        with open(tmp_path / 'master.log', 'wb') as log:
            processes.append(start(plan['master'], log))
        # the master alone: it answers, no segment is mounted
        before = mooncake_health.watch(params(plan, 0))
        deadline = time.monotonic() + 30
        while not before['master'] and time.monotonic() < deadline:
            time.sleep(0.5)
            before = mooncake_health.watch(params(plan, 0))
        assert before['master'] and before['metadata'], (tmp_path / 'master.log').read_text()[-2000:]
        assert not before['up'] and not before['mounted'] and before['capacity_bytes'] == 0
        assert 'not mounted' in before['problems'][0]

        with open(tmp_path / 'segment.log', 'wb') as log:
            processes.append(start(plan['segment'], log, plan['segment_environment']))
        after = mooncake_health.watch(params(plan, 60))
        assert after['up'], (after['problems'], (tmp_path / 'segment.log').read_text()[-2000:])
        assert after['mounted'] and after['capacity_bytes'] == SEGMENT and after['key_count'] == 0
        assert after['data_host'] == '127.0.0.1'
        assert [segment['capacity_bytes'] for segment in after['segments']] == [SEGMENT]
        assert after['segments'][0]['name'].startswith('127.0.0.1:')

        # a segment bigger than the holder mounted is not up
        assert not mooncake_health.watch(dict(params(plan, 0), segment_bytes=SEGMENT + 1))['up']
    finally:
        for process in reversed(processes):
            stop(process)
    assert all(process.poll() is not None for process in processes)
