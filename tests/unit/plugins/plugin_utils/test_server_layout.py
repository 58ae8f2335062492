"""A server over several containers (plugin_utils/server_layout.py): where each host stands in its
server, and every layout that cannot work refused with a message naming the server, its hosts
and the values, before any host is touched. In-process: many layouts, no Ansible run."""

import pytest

from ansible_collections.eagle3.extraction.plugins.plugin_utils import server_layout
from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_inputs import cross_host_errors
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_layout import layout, layout_errors

KEY = 'sk-secret-value-0123'


def node(rank, name='duo', address=None, **more):
    values = {'sglang_server_name': name, 'sglang_server_node_rank': rank, 'sglang_server_tp_size': 4,
              'gpu_check_gpu_count': 2, 'sglang_server_host': '0.0.0.0',
              'sglang_server_model_path': '/srv/models/m', 'proxmox_container_node': 'pve1',
              'proxmox_container_vmid': 101 + int(rank or 0)}
    if address:
        values['ansible_host'] = address
    values.update(more)
    return values


def fleet(**hosts):
    return dict(hosts)


GOOD = {
    'two nodes': fleet(ct1=node(0, address='10.0.0.1'), ct3=node(1, address='10.0.0.3')),
    'ranks given as strings': fleet(ct1=node('0'), ct3=node('1')),
    'beside a one-node server': fleet(ct1=node(0), ct3=node(1), ct2={'sglang_server_model_path': '/m'}),
    'a named one-node server': fleet(ct1=node(0, name='solo', sglang_server_tp_size=2)),
    'two servers': fleet(a0=node(0), a1=node(1), b0=node(0, name='other'), b1=node(1, name='other')),
    'four nodes of one GPU each': fleet(**dict(('ct%d' % r, node(r, gpu_check_gpu_count=1)) for r in range(4))),
    'the dist-init port beside the HTTP port': fleet(ct1=node(0, sglang_server_dist_init_port=8001),
                                                     ct3=node(1, sglang_server_dist_init_port=8001)),
    'the GPUs unknown': fleet(ct1=node(0, gpu_check_gpu_count=None), ct3=node(1, gpu_check_gpu_count=None)),
}

BAD = [
    ('ranks 0 and 0', fleet(ct1=node(0), ct3=node(0)),
     'server duo: the node ranks (ct1=0, ct3=0) do not cover 0 to 1 once each'),
    ('ranks 0 and 2', fleet(ct1=node(0), ct3=node(2)),
     'server duo: the node ranks (ct1=0, ct3=2) do not cover 0 to 1 once each'),
    ('ranks 1 and 2', fleet(ct1=node(1), ct3=node(2)), 'do not cover 0 to 1 once each'),
    ('a rank missing', fleet(ct1=node(0), ct3=dict(node(1), sglang_server_node_rank=None)),
     'sglang_server_node_rank=None is not an integer'),
    ('a rank not set', fleet(ct1=node(0), ct3=dict((k, v) for k, v in node(1).items()
                                                   if k != 'sglang_server_node_rank')),
     'ct3: sglang_server_node_rank is not set; server duo has 2 nodes (ct1, ct3)'),
    ('a named one-node server of rank 1', fleet(ct1=node(1, name='solo')),
     'server solo: the node ranks (ct1=1) do not cover 0 to 0 once each'),
    ('three nodes, ranks 0 1 1', fleet(a=node(0, gpu_check_gpu_count=1, sglang_server_tp_size=3),
                                       b=node(1, gpu_check_gpu_count=1, sglang_server_tp_size=3),
                                       c=node(1, gpu_check_gpu_count=1, sglang_server_tp_size=3)),
     'the node ranks (a=0, b=1, c=1) do not cover 0 to 2 once each'),
    ('tp-size not the sum', fleet(ct1=node(0, sglang_server_tp_size=2), ct3=node(1, sglang_server_tp_size=2)),
     "server duo: sglang_server_tp_size=2 must be the sum of its nodes' GPUs, the same number on each "
     "(ct1 2, ct3 2: 4 in all)"),
    ('GPUs not the same on each node', fleet(ct1=node(0, gpu_check_gpu_count=1, sglang_server_tp_size=3),
                                             ct3=node(1, gpu_check_gpu_count=2, sglang_server_tp_size=3)),
     'the same number on each (ct1 1, ct3 2: 3 in all)'),
    ('GPUs from the container lists', fleet(ct1=node(0, gpu_check_gpu_count=None, proxmox_container_gpus=[0]),
                                            ct3=node(1, gpu_check_gpu_count=None, proxmox_container_gpus=[0])),
     '(ct1 1, ct3 1: 2 in all)'),
    ('tp-size left to its default', fleet(ct1=dict((k, v) for k, v in node(0).items() if k != 'sglang_server_tp_size'),
                                          ct3=dict((k, v) for k, v in node(1).items() if k != 'sglang_server_tp_size')),
     'server duo: set sglang_server_tp_size on its nodes (ct1, ct3) to the sum of their GPUs'),
    ('another model', fleet(ct1=node(0), ct3=node(1, sglang_server_model_path='/srv/models/other')),
     "server duo: its nodes differ in sglang_server_model_path (ct1: '/srv/models/m', ct3: '/srv/models/other')"),
    ('another sglang', fleet(ct1=node(0, ml_env_packages=['sglang==0.5.23']),
                             ct3=node(1, ml_env_packages=['sglang==0.5.14'])),
     'its nodes differ in ml_env_packages'),
    ('the patch on one node only', fleet(ct1=node(0, sglang_patch_state='present'), ct3=node(1)),
     "its nodes differ in sglang_patch_state (ct1: 'present', ct3: (not set))"),
    ('other flags', fleet(ct1=node(0, sglang_server_flags={'mem-fraction-static': 0.8}),
                          ct3=node(1, sglang_server_flags={'mem-fraction-static': 0.9})),
     'its nodes differ in sglang_server_flags'),
    ('another port', fleet(ct1=node(0, sglang_server_port=8000), ct3=node(1, sglang_server_port=8001)),
     'its nodes differ in sglang_server_port'),
    ('another dist-init port', fleet(ct1=node(0, sglang_server_dist_init_port=5000),
                                     ct3=node(1, sglang_server_dist_init_port=5001)),
     'its nodes differ in sglang_server_dist_init_port'),
    ('rank 0 on loopback', fleet(ct1=node(0, sglang_server_host='127.0.0.1'), ct3=node(1)),
     'server duo: rank 0 (ct1) listens on sglang_server_host=127.0.0.1'),
    ('rank 0 on the default host', fleet(ct1=dict((k, v) for k, v in node(0).items() if k != 'sglang_server_host'),
                                         ct3=node(1)),
     'listens on sglang_server_host=127.0.0.1 (the default)'),
    ('rank 0 on ::1', fleet(ct1=node(0, sglang_server_host='::1'), ct3=node(1, sglang_server_host='::1')),
     "server duo: rank 0 (ct1) listens on sglang_server_host=::1"),
    # loopback in other spellings: 127.0.0.0/8 and ::1 written out
    ('rank 0 on 127.0.0.2', fleet(ct1=node(0, sglang_server_host='127.0.0.2'), ct3=node(1)),
     'server duo: rank 0 (ct1) listens on sglang_server_host=127.0.0.2'),
    ('rank 0 on ::1 written out', fleet(ct1=node(0, sglang_server_host='0:0:0:0:0:0:0:1'), ct3=node(1)),
     'server duo: rank 0 (ct1) listens on sglang_server_host=0:0:0:0:0:0:0:1'),
    # --dist-init-addr's port is rank 0's: not the one it serves HTTP on
    ('dist-init port on the HTTP port', fleet(ct1=node(0, sglang_server_port=5000), ct3=node(1, sglang_server_port=5000)),
     'server duo: rank 0 (ct1) has sglang_server_dist_init_port=5000 (the default), the port it serves HTTP on '
     '(sglang_server_port=5000)'),
    ('dist-init port on the HTTP port given',
     fleet(ct1=node(0, sglang_server_port=30000, sglang_server_dist_init_port=30000),
           ct3=node(1, sglang_server_port=30000, sglang_server_dist_init_port=30000)),
     "has sglang_server_dist_init_port=30000, the port it serves HTTP on (sglang_server_port=30000)"),
    ('a server named after another host', fleet(ct1=node(0, name='ct2'), ct3=node(1, name='ct2'),
                                                ct2={'sglang_server_model_path': '/m'}),
     'server ct2 (sglang_server_name of ct1, ct3) has the name of the host ct2'),
]


@pytest.mark.parametrize('name', sorted(GOOD))
def test_a_layout_that_works_passes(name):
    assert layout_errors(GOOD[name]) == []


def test_every_bad_layout_is_refused_naming_the_server_hosts_and_values():
    """All of them at once (one process): each layout's expected message, and nothing else refused twice."""
    missed = []
    for name, hosts, expected in BAD:
        errors = layout_errors(hosts)
        if not any(expected in error for error in errors):
            missed.append('%s: expected %r in %r' % (name, expected, errors))
    assert not missed, '\n'.join(missed)
    assert len(BAD) >= 17


def test_the_api_key_is_compared_but_never_shown():
    errors = layout_errors(fleet(ct1=node(0, sglang_server_api_key=KEY), ct3=node(1, sglang_server_api_key='other')))
    assert any('differ in sglang_server_api_key (ct1: (hidden), ct3: (hidden))' in e for e in errors), errors
    assert KEY not in '\n'.join(errors)


@pytest.mark.parametrize('serial', ['50%', 1, [1, '100%'], '1'])
def test_a_multi_node_server_needs_every_node_in_one_batch(serial):
    errors = layout_errors(GOOD['two nodes'], serial)
    assert any('server duo spans ct1, ct3: its nodes start together, so extract_serial=' in e for e in errors), errors


def test_batches_are_free_without_a_multi_node_server():
    assert layout_errors({'ct1': {}, 'ct2': {}}, 1) == []


def test_a_host_alone_is_a_one_node_server():
    place = layout({'ct1': {'ansible_host': '10.0.0.1'}, 'ct2': {}}, 'ct1')
    assert place == {'name': 'ct1', 'nodes': ['ct1'], 'nnodes': 1, 'rank': 0, 'rank0': 'ct1',
                     'rank0_address': '10.0.0.1', 'dist_init_addr': '', 'servers': ['ct1', 'ct2']}


def test_the_nodes_are_in_rank_order_and_rank_0_gives_the_dist_init_addr():
    hosts = {'b': node(1, address='10.0.0.2'), 'a': node(0, address='10.0.0.1', sglang_server_dist_init_port=6000),
             'solo': {}}
    place = layout(hosts, 'b')
    assert (place['nodes'], place['rank'], place['nnodes']) == (['a', 'b'], 1, 2)
    assert place['dist_init_addr'] == '10.0.0.1:6000' and place['rank0_address'] == '10.0.0.1'
    assert place['servers'] == ['duo', 'solo']
    assert layout(dict(hosts, a=dict(hosts['a'], sglang_server_dist_init_host='fd00::1')), 'b')[
        'dist_init_addr'] == '[fd00::1]:6000'


def test_two_servers_cannot_share_a_container():
    hosts = fleet(a0=node(0), a1=node(1), b0=node(0, name='other', proxmox_container_vmid=102),
                  b1=node(1, name='other', proxmox_container_vmid=104))
    errors = cross_host_errors(hosts, ['pve1'])
    assert any('a1 and b0 are all container 102 on pve1' in e and 'the node of one server' in e for e in errors), errors


def test_a_multi_node_server_is_not_held_to_one_node_s_tp_rule():
    hosts = GOOD['two nodes']
    assert cross_host_errors(hosts, ['pve1']) == []


def test_an_ipv6_rank_0_is_put_into_the_urls_in_brackets():
    from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_address import (  # pylint: disable=import-outside-toplevel
        address)
    hosts = fleet(ct1=node(0, address='fd00:200::101', sglang_server_host='fd00:200::101'), ct3=node(1, address='fd00:200::103'))
    assert address(hosts, 'ct3')['client_url'] == 'http://[fd00:200::101]:8000'
    assert address(hosts, 'ct1')['controller_url'] == 'http://[fd00:200::101]:8000'
    assert layout(hosts, 'ct3')['dist_init_addr'] == '[fd00:200::101]:5000'


def test_the_dist_init_port_is_the_role_default_when_not_set(monkeypatch):
    # the default is the argument spec's, read there (not 5000 written again in code)
    hosts = fleet(ct1=node(0, address='10.0.0.1'), ct3=node(1, address='10.0.0.3'))
    assert layout(hosts, 'ct3')['dist_init_addr'] == '10.0.0.1:5000'
    monkeypatch.setattr(server_layout, 'spec_defaults', lambda role, names: {'sglang_server_dist_init_port': 6123})
    assert layout(hosts, 'ct3')['dist_init_addr'] == '10.0.0.1:6123'
    assert layout_errors(fleet(ct1=node(0, sglang_server_port=6123), ct3=node(1, sglang_server_port=6123))) == [
        'server duo: rank 0 (ct1) has sglang_server_dist_init_port=6123 (the default), the port it serves HTTP on '
        '(sglang_server_port=6123); the nodes meet on another port: give sglang_server_dist_init_port a free one']
