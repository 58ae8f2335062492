"""One SGLang server over two containers on two hypervisors (ct1 on pve1 is rank 0, ct3 on pve2
rank 1, tp-size 4 over their 2 + 2 GPUs) beside a one-node server (ct2), on the local fleet,
through ansible-runner. The tests run in order and build on each other:

1. a bad rank layout fails in the first play, with no container touched;
2. cold (no unit, no stamp on any container): one run brings both servers up; only rank 0 serves
   HTTP, rank 1 joined it over --dist-init-addr with its own NCCL/Gloo interface;
3. a second run changes nothing;
4. rank 1 killed: rank 0 stops answering 200; the next run restarts the whole two-node server
   (both units stopped before either started again) and leaves ct2 alone;
5. a node that dies at start fails the whole server, naming that node and the cause;
6. stop.yml stops every node and proves each free.

It ends as test_rollout.py does (every server stopped, ports free, GPUs at 0 MiB), so the other
fleet tests find the fleet as they expect it.
"""

import os
import subprocess
import sys
import time

import pytest

from collection_helpers import REPO
from fleet_helpers import FLEET
from test_rollout import CTS, HEALTH_GET, PORT, ct, extract, inventory

pytestmark = FLEET + [pytest.mark.whole_fleet]

UNIT = 'sglang-extraction.service'
DIST_INIT_PORT = 5000


def node(rank, **more):
    return dict({'sglang_server_name': 'duo', 'sglang_server_node_rank': rank, 'sglang_server_tp_size': 4,
                 'sglang_server_socket_ifname': 'eth0'}, **more)


def layout(tmp_path, name, ct1, ct3):
    return inventory(tmp_path, name, {'all': {'children': {'extraction_servers': {'hosts': {'ct1': ct1, 'ct3': ct3}}}}})


@pytest.fixture(scope='module')
def state():
    return {}


@pytest.fixture
def duo(tmp_path):
    return [layout(tmp_path, 'duo', node(0), node(1))]


def http_status(address):
    """The status of GET /health on port PORT of address, from outside the containers ('' when none)."""
    answer = subprocess.run(['ip', 'netns', 'exec', 'lab-ctl', sys.executable, '-c', HEALTH_GET,
                             'http://%s:%d/health' % (address, PORT)],
                            capture_output=True, text=True, check=False, timeout=30)
    return answer.stdout.strip()


def unit_times(host):
    """The unit's last stop and start on the kernel's monotonic clock (the containers share it)."""
    out = ct(host, 'systemctl show -p InactiveEnterTimestampMonotonic -p ActiveEnterTimestampMonotonic '
                   '-p InvocationID %s' % UNIT).stdout
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def rows_by_server(result):
    res = result.results('Print one line per extraction server, then each failure and its cause')['localhost']
    lines = res['msg'].splitlines()
    return dict((line.split()[0], line) for line in lines[1:] if line.startswith(('duo ', 'ct2 '))), lines


def assert_both_up(result, run):
    rows, lines = rows_by_server(result)
    assert set(rows) == {'duo', 'ct2'}, lines
    assert 'duo (ct1, ct3)' in rows['duo'] and '101@pve1, 103@pve2' in rows['duo'], rows['duo']
    for name in rows:
        assert ' healthy ' in rows[name] and rows[name].rstrip().endswith(run), (name, lines)
    assert '2 of 2 servers healthy' in lines, lines
    assert http_status(CTS['ct1'][0]) == '200'
    assert http_status(CTS['ct2'][0]) == '200'
    # only rank 0 serves HTTP; rank 1 runs, joined to it
    assert ct('ct3', 'ss -H -ltn sport = :%d' % PORT).stdout.strip() == ''
    assert ct('ct3', 'systemctl is-active %s' % UNIT).stdout.strip() == 'active'


def test_bad_rank_layout_fails_in_the_first_play(tmp_path):
    bad = layout(tmp_path, 'bad', node(0), node(0, sglang_server_tp_size=6))
    result = extract(tmp_path, 'bad', inventories=[bad])

    assert result.rc != 0
    msg = result.results('Check every container\'s values against the roles\' argument specs, across hosts, and '
                         'the rollout')['localhost']['msg']
    assert 'server duo: the node ranks (ct1=0, ct3=0) do not cover 0 to 1 once each' in msg, msg
    assert "server duo: its nodes differ in sglang_server_tp_size (ct1: 4, ct3: 6)" in msg, msg
    # nothing else ran: no hypervisor, no container was contacted
    assert set(result.stats.get('ok', {})) | set(result.stats.get('changed', {})) <= {'localhost'}, result.stats


def test_cold_run_brings_both_servers_up(tmp_path, state, duo):
    # ct1 to ct3 only: ct4 is test_pct_fleet.py's, which may run beside this test (lab/run-all.sh)
    up = subprocess.run(['bash', os.path.join(REPO, 'lab', 'fleet', 'up.sh')] + sorted(CTS), capture_output=True,
                        text=True, check=False)
    assert up.returncode == 0, up.stderr
    for host in CTS:
        ct(host, 'systemctl stop %s 2>/dev/null; rm -f /etc/systemd/system/%s /var/lib/eagle3-extraction-converged.json;'
                 ' systemctl daemon-reload' % (UNIT, UNIT))

    result = extract(tmp_path, 'cold', inventories=duo)

    assert result.rc == 0, result.output[-5000:]
    assert_both_up(result, 'applied')
    config = ct('ct3', 'cat /etc/sglang/sglang-extraction.yaml').stdout
    for flag in ('"nnodes": 2', '"node-rank": 1', '"dist-init-addr": "10.200.0.101:%d"' % DIST_INIT_PORT,
                 '"tp-size": 4'):
        assert flag in config, config
    unit = ct('ct3', 'cat /etc/systemd/system/%s' % UNIT).stdout
    assert 'Environment=NCCL_SOCKET_IFNAME=eth0' in unit and 'Environment=GLOO_SOCKET_IFNAME=eth0' in unit, unit
    assert 'node_rank 1 joined from 10.200.0.103' in ct('ct1', 'cat /var/log/sglang/sglang-extraction.log').stdout
    # ct2 is a one-node server as before
    assert 'nnodes' not in ct('ct2', 'cat /etc/sglang/sglang-extraction.yaml').stdout
    state['cold'] = True


def test_second_run_changes_nothing(tmp_path, state, duo):
    assert state.get('cold'), 'needs the cold run'
    result = extract(tmp_path, 'again', inventories=duo)

    assert result.rc == 0, result.output[-5000:]
    assert result.changed_hosts() == {}
    assert_both_up(result, 'unchanged')


def test_killing_rank_1_restarts_the_whole_server_and_leaves_ct2_alone(tmp_path, state, duo):
    assert state.get('cold'), 'needs the cold run'
    before = dict((host, unit_times(host)) for host in CTS)
    ct('ct3', 'systemctl kill --signal=SIGKILL %s' % UNIT)
    deadline = time.monotonic() + 30
    while http_status(CTS['ct1'][0]) == '200':   # rank 0 lost its peer (in a real server: NCCL hangs)
        assert time.monotonic() < deadline, 'rank 0 still answers 200 without rank 1'
        time.sleep(0.5)

    result = extract(tmp_path, 'rank1-killed', inventories=duo)

    assert result.rc == 0, result.output[-5000:]
    rows, lines = rows_by_server(result)
    assert rows['duo'].rstrip().endswith('applied') and rows['ct2'].rstrip().endswith('unchanged'), lines
    assert_both_up(result, run='')
    after = dict((host, unit_times(host)) for host in CTS)
    # the whole server restarted: both units stopped before either started again
    assert after['ct1']['InvocationID'] != before['ct1']['InvocationID']
    stops = [int(after[h]['InactiveEnterTimestampMonotonic']) for h in ('ct1', 'ct3')]
    starts = [int(after[h]['ActiveEnterTimestampMonotonic']) for h in ('ct1', 'ct3')]
    assert max(stops) < min(starts), after
    assert after['ct2'] == before['ct2']


def test_a_node_that_dies_at_start_fails_the_whole_server_naming_it(tmp_path, state):
    assert state.get('cold'), 'needs the cold run'
    crash = {'SGLANG_STANDIN_LOAD_SECONDS': '2', 'SGLANG_STANDIN_CRASH': 'RuntimeError: NCCL error: unhandled system error'}
    broken = [layout(tmp_path, 'crash', node(0), node(1, sglang_server_env=crash))]

    result = extract(tmp_path, 'crash', inventories=broken)

    assert result.rc != 0
    rows, lines = rows_by_server(result)
    assert ' FAILED ' in rows['duo'] and rows['ct2'].rstrip().endswith('unchanged'), lines
    for host in ('ct1', 'ct3'):
        failure = result.results('Fail this host', host)[host]['msg']
        assert 'server duo (ct1, ct3) did not come up: node ct3 (rank 1) died while starting' in failure, failure
        assert 'cause: NCCL error' in failure and 'RuntimeError: NCCL error: unhandled system error' in failure


def test_stop_stops_every_node(tmp_path, state, duo):
    assert state.get('cold'), 'needs the cold run'
    result = extract(tmp_path, 'stop', playbook='playbooks/stop.yml', inventories=duo)

    assert result.rc == 0, result.output[-5000:]
    for host in CTS:
        assert ct(host, 'systemctl is-active %s' % UNIT, check=False).stdout.strip() == 'inactive'
        assert ct(host, 'ss -H -ltn "( sport = :%d or sport = :%d )"' % (PORT, DIST_INIT_PORT)).stdout.strip() == ''
        assert ct(host, 'pgrep -f "^sglang::"', check=False).returncode == 1
        used = ct(host, 'nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits').stdout.split()
        assert used == ['0', '0'], (host, used)
    # one node of a server is never stopped alone
    alone = extract(tmp_path, 'stop-one', playbook='playbooks/stop.yml', inventories=duo,
                    extravars={'stop_hosts': 'ct3'})
    assert alone.rc != 0
    assert 'stop all of its nodes together (-e stop_hosts=ct1,ct3)' in alone.output, alone.output[-3000:]
