"""rollout_table: extract.yml's closing table, computed in Python from the hosts' results and
inventory_check's plans: one row per server, every column, the summary and the FAILED
lines tests/integration/test_rollout.py reads back (split on two spaces or more)."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.eagle3.extraction.plugins.filter.rollout_converged import rollout_converged
from ansible_collections.eagle3.extraction.plugins.filter.rollout_table import rollout_table
from ansible_collections.eagle3.extraction.plugins.module_utils.status_table import status_table
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import READ, plan

GPUS = '2 x NVIDIA H200'
DRIVER = '580.159.04'


def healthy(run='applied', gpus=GPUS, driver=DRIVER):
    return {'health': 'healthy', 'run': run, 'gpus': gpus, 'driver': driver}


def failed(task, cause):
    return {'health': 'FAILED', 'run': 'failed', 'gpus': '-', 'driver': '-', 'task': task, 'cause': cause}


def host(vmid, node, result=None, **more):
    values = dict(proxmox_container_vmid=vmid, proxmox_container_node=node, **more)
    if result is not None:
        values['__extract_result'] = result
    return values


def addresses(*hosts, **urls):
    return dict((name, {'controller_url': urls.get(name, 'http://10.0.0.%d:8000' % n)})
                for n, name in enumerate(hosts, 1))


def plans(hostvars, given):
    """inventory_check's plans of these hosts, each with the address fields ``given`` sets."""
    values = dict((name, dict((k, v) for k, v in found.items() if k in READ)) for name, found in hostvars.items())
    made = dict((name, plan(values, name)) for name in values)
    for name, address in given.items():
        made[name]['server']['address'].update(address)
    return made


def parse(text):
    lines = text.split('\n')
    rows = dict((line.split()[0], re.split(r'\s{2,}', line)) for line in lines[1:] if re.match(r'\S+ ', line)
                and not line.startswith('FAILED') and 'servers healthy' not in line)
    return lines, rows, [line for line in lines if line.startswith('FAILED') or 'servers healthy' in line]


def test_converged_applied_failed_and_unreachable_hosts_each_get_their_row_and_cause():
    hostvars = {
        'ct1': host(101, 'pve1', healthy('unchanged')),
        'ct2': host(102, 'pve1', healthy('applied')),
        'ct3': host(103, 'pve2', failed('Fail with the cause when the server did not come up',
                                        "No module named 'sgl_kernel'")),
        'ct4': host(104, 'pve3'),                      # never reached: no result
    }
    urls = addresses('ct1', 'ct2', 'ct3', 'ct4', ct2='http://10.0.0.2:30000')
    lines, rows, summary = parse(rollout_table(list(hostvars), hostvars, plans(hostvars, urls)))

    assert lines[0].split() == ['SERVER', 'VMID@HYPERVISOR', 'GPUS', 'DRIVER', 'URL', 'HEALTH', 'RUN']
    assert rows['ct1'] == ['ct1', '101@pve1', GPUS, DRIVER, 'http://10.0.0.1:8000', 'healthy', 'unchanged']
    # the URL is inventory_check's, placed as it is (the port its flags moved)
    assert rows['ct2'] == ['ct2', '102@pve1', GPUS, DRIVER, 'http://10.0.0.2:30000', 'healthy', 'applied']
    assert rows['ct3'][5:] == ['FAILED', 'failed']
    assert rows['ct4'] == ['ct4', '104@pve3', '-', '-', 'http://10.0.0.4:8000', 'UNREACHABLE', '-']
    assert summary == [
        '2 of 4 servers healthy',
        "FAILED ct3: failed in Fail with the cause when the server did not come up: No module named 'sgl_kernel'",
        'FAILED ct4: unreachable over SSH, or the rollout stopped before it (extract_max_fail_percentage)',
    ]


def test_each_started_shard_is_said_with_its_start_after_the_summary():
    """extract.yml said "healthy applied" while a shard's job exited 2 seconds later: each host's shards say how
    they started (extraction_job_outcome's shards), on lines that start with no host's name (rows do)."""
    full = 'output disk full: /srv/x/shard-1-of-2: 0 B free, under the 8.0 GiB floor'
    shards = [{'shard': 'shard-0', 'outcome': 'sending', 'error': ''},
              {'shard': 'shard-1', 'outcome': 'paused', 'error': full}]
    applied = dict(healthy('applied'), job=shards)
    refused = dict(failed('Wait for each shard to get past its start, naming one that refused',
                          'job@demo-shard-0.service refused: the API key\nwas refused'),
                   job=[{'shard': 'shard-0', 'outcome': 'refused', 'error': 'the API key\nwas refused'}])
    hostvars = {'ct1': host(101, 'pve1', applied), 'ct2': host(102, 'pve1', refused), 'ct3': host(103, 'pve1', healthy())}
    lines, rows, dummy = parse(rollout_table(list(hostvars), hostvars, plans(hostvars, addresses('ct1', 'ct2', 'ct3'))))
    assert rows['ct1'][5:] == ['healthy', 'applied'] and rows['ct2'][5:] == ['FAILED', 'failed']
    after = lines[lines.index('2 of 3 servers healthy') + 1:]
    assert after[:2] == ['job of ct1: shard-0 sending, shard-1 paused (%s)' % full,
                         'job of ct2: shard-0 refused (the API key was refused)']
    assert after[2].startswith('FAILED ct2: ') and len(after) == 3


def check(converged, gpus=GPUS, driver=DRIVER):
    """converged_state's result at the converged check (and, converged=True, the stamp it read)."""
    return {'converged': converged, 'stamp': {'gpus': gpus, 'driver': driver} if converged else None}


def test_a_converged_server_left_alone_is_unchanged_with_its_stamps_gpus():
    """extract.yml ends the play of a converged server's nodes (rollout_converged) and sets no result: the
    table reports it unchanged by the same rule, with what its stamp recorded."""
    hostvars = {
        'ct1': host(101, 'pve1', __extract_converged=check(True, gpus='8 x NVIDIA H200')),
        'ct2': host(102, 'pve1', healthy('applied'), __extract_converged=check(False)),
        # converged at the check, then unreachable: no result, and its check said not converged
        'ct3': host(103, 'pve2', __extract_converged=check(False)),
    }
    assert [rollout_converged(list(hostvars), hostvars, name) for name in hostvars] == [True, False, False]
    dummy, rows, summary = parse(rollout_table(list(hostvars), hostvars, plans(hostvars, addresses('ct1', 'ct2', 'ct3'))))
    assert rows['ct1'] == ['ct1', '101@pve1', '8 x NVIDIA H200', DRIVER, 'http://10.0.0.1:8000', 'healthy',
                           'unchanged']
    assert rows['ct3'][5:] == ['UNREACHABLE', '-']
    assert summary[0] == '2 of 3 servers healthy'


def test_a_node_is_left_alone_only_with_every_other_node_of_its_server():
    nodes = dict(sglang_server_name='big')
    hostvars = {
        'big-a': host(201, 'pve1', __extract_converged=check(True), sglang_server_node_rank=0, **nodes),
        'big-b': host(202, 'pve2', __extract_converged=check(False), sglang_server_node_rank=1, **nodes),
    }
    assert not rollout_converged(list(hostvars), hostvars, 'big-a')
    # big-b ran its roles and recorded (the record says converged too): big-a, lost after its check, is not
    # "unchanged", since big-b has a result of this run
    hostvars['big-b'] = host(202, 'pve2', healthy('applied'), __extract_converged=check(True),
                             sglang_server_node_rank=1, **nodes)
    assert not rollout_converged(list(hostvars), hostvars, 'big-a')
    dummy, rows, dummy = parse(rollout_table(list(hostvars), hostvars, plans(hostvars, addresses('big-a', 'big-b'))))
    assert rows['big'][5:] == ['UNREACHABLE', 'applied']
    hostvars['big-b'] = host(202, 'pve2', __extract_converged=check(True), sglang_server_node_rank=1, **nodes)
    assert rollout_converged(list(hostvars), hostvars, 'big-a') and rollout_converged(list(hostvars), hostvars, 'big-b')
    with pytest.raises(AnsibleFilterError, match='not one of the extraction servers'):
        rollout_converged(list(hostvars), hostvars, 'ct9')


def test_a_multi_node_server_is_one_row_in_rank_order():
    hostvars = {
        'ct1': host(101, 'pve1', healthy()),
        'big-b': host(201, 'pve2', healthy('unchanged'), sglang_server_name='big', sglang_server_node_rank=1),
        'big-a': host(202, 'pve1', healthy('applied', driver='580.1'), sglang_server_name='big',
                      sglang_server_node_rank=0),
    }
    lines, rows, summary = parse(rollout_table(list(hostvars), hostvars, plans(hostvars, addresses('ct1', 'big-b', 'big-a'))))

    assert len(lines) == 4       # header, two servers, summary
    # rank 0 first; the URL is rank 0's; two runs that differ are "applied"; drivers once each
    assert rows['big'] == ['big (big-a, big-b)', '202@pve1, 201@pve2', GPUS + ' + ' + GPUS, '580.1, ' + DRIVER,
                           'http://10.0.0.3:8000', 'healthy', 'applied']
    assert summary == ['2 of 2 servers healthy']


def test_one_failed_node_fails_its_whole_server_and_is_named():
    hostvars = {
        'a': host(1, 'pve1', healthy(), sglang_server_name='s', sglang_server_node_rank=0),
        'b': host(2, 'pve2', failed('Check that the hypervisor answered', 'hypervisor pve2 is unreachable'),
                  sglang_server_name='s', sglang_server_node_rank=1),
        'c': host(3, 'pve2', sglang_server_name='s', sglang_server_node_rank=2),
    }
    dummy, rows, summary = parse(rollout_table(list(hostvars), hostvars, plans(hostvars, addresses('a', 'b', 'c'))))
    assert rows['s'][5:] == ['FAILED', 'failed']
    assert summary[0] == '0 of 1 servers healthy'
    assert [line.split(':')[0] for line in summary[1:]] == ['FAILED b', 'FAILED c']


def test_many_servers_align_and_a_cause_cannot_break_the_table():
    hostvars = dict(('ct%d' % n, host(100 + n, 'pve%d' % (n % 3), healthy('unchanged'))) for n in range(1, 41))
    hostvars['ct7'] = host(107, 'pve1', failed('Start', 'first line\nsecond line'))
    text = rollout_table(list(hostvars), hostvars, plans(hostvars, addresses(*hostvars)))
    lines, rows, summary = parse(text)
    assert len(rows) == 40 and summary[0] == '39 of 40 servers healthy'
    # every row's URL column starts at the same place
    assert len(set(line.index('http://') for line in lines[1:41])) == 1
    # a cause of several lines (a command's output) stays on its host's one FAILED line
    assert summary[1:] == ['FAILED ct7: failed in Start: first line second line']


def test_the_status_table_comes_from_the_same_renderer():
    """status.yml's table: a cell's control characters become '?', as in the rollout table."""
    lines = status_table([{'host': 'ct1', 'error': 'Failed to connect\nto the host'}])['lines']
    assert len(lines) == 3 and 'unreachable: Failed to connect?to the host' in lines[1]
    assert re.split(r'\s{2,}', lines[0])[:3] == ['HOST', 'SHARD', 'STATE']


@pytest.mark.parametrize('hosts, urls', [('ct1', {}), ([1], {}), (['ct1'], None)])
def test_bad_input_is_refused(hosts, urls):
    with pytest.raises(AnsibleFilterError, match='rollout_table'):
        rollout_table(hosts, {'ct1': {}}, urls)


def test_a_server_reached_through_pct_shows_its_own_url_behind_its_hypervisor():
    pct = {'ansible_connection': 'community.proxmox.proxmox_pct_remote'}
    hostvars = {'ct4': host(104, 'pve2', healthy(), **pct), 'ct5': host(105, 'pve2', **pct)}
    urls = {'ct4': {'controller_url': None, 'client_url': 'http://127.0.0.1:8000', 'via': 'pve2'},
            # it binds a real address: the controller calls that
            'ct5': {'controller_url': 'http://10.9.0.5:8000', 'client_url': 'http://10.9.0.5:8000', 'via': 'pve2'}}
    lines, rows, summary = parse(rollout_table(list(hostvars), hostvars, plans(hostvars, urls)))
    assert rows['ct4'] == ['ct4', '104@pve2', GPUS, DRIVER, 'via pve2: http://127.0.0.1:8000', 'healthy', 'applied']
    assert rows['ct5'][4:] == ['http://10.9.0.5:8000', 'UNREACHABLE', '-']
    # not reached: through its hypervisor's pct, not over SSH
    assert summary[1] == ('FAILED ct5: unreachable through pct on pve2, or the rollout stopped before it '
                          '(extract_max_fail_percentage)')
