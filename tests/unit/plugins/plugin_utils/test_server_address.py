"""Where a server listens and which URL calls it (plugin_utils/server_address.py, server_listen.py): the
port and bind host its variables give (the config file's: no flag sets them), the URL a client on the host calls and the one the controller calls,
for every way the inventory can move them; and every bad value refused naming its variable and value.
In-process: many inventories, no Ansible run."""

import pytest

from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_address import (
    AddressError, address, exposure_warning)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import defaults


def one(**values):
    """The address of ct1, a one-node server at 10.0.0.1, with these variables."""
    return address({'ct1': dict({'ansible_host': '10.0.0.1'}, **values)}, 'ct1')


GOOD = [
    # the role's defaults: loopback, 8000 (read from its argument spec)
    ('nothing set', {}, 8000, '127.0.0.1', 'http://127.0.0.1:8000', 'http://10.0.0.1:8000'),
    ('sglang_server_port', {'sglang_server_port': 8100}, 8100, '127.0.0.1', 'http://127.0.0.1:8100',
     'http://10.0.0.1:8100'),
    ('the port as a string', {'sglang_server_port': '8100'}, 8100, '127.0.0.1', 'http://127.0.0.1:8100',
     'http://10.0.0.1:8100'),
    ('0.0.0.0', {'sglang_server_host': '0.0.0.0'}, 8000, '0.0.0.0', 'http://127.0.0.1:8000', 'http://10.0.0.1:8000'),
    # SGLang's uvicorn binds :: as an IPv6-only socket (asyncio's create_server sets IPV6_V6ONLY):
    # 127.0.0.1 is refused there, ::1 answers; 0.0.0.0 and empty answer on 127.0.0.1
    ('::', {'sglang_server_host': '::'}, 8000, '::', 'http://[::1]:8000', 'http://10.0.0.1:8000'),
    ('empty', {'sglang_server_host': ''}, 8000, '', 'http://127.0.0.1:8000', 'http://10.0.0.1:8000'),
    # a real address: clients on the host and the controller both call it
    ('an IPv4 address', {'sglang_server_host': '10.0.0.9'}, 8000, '10.0.0.9', 'http://10.0.0.9:8000',
     'http://10.0.0.9:8000'),
    ('an IPv6 address', {'sglang_server_host': 'fd00::5', 'sglang_server_port': 30000}, 30000, 'fd00::5',
     'http://[fd00::5]:30000', 'http://[fd00::5]:30000'),
    ('IPv6 loopback', {'sglang_server_host': '::1'}, 8000, '::1', 'http://[::1]:8000', 'http://10.0.0.1:8000'),
    ('localhost', {'sglang_server_host': 'localhost'}, 8000, 'localhost', 'http://localhost:8000',
     'http://10.0.0.1:8000'),
    ('a host name', {'sglang_server_host': 'ct1.lab.example'}, 8000, 'ct1.lab.example',
     'http://ct1.lab.example:8000', 'http://ct1.lab.example:8000'),
    # the controller calls the container's own address: IPv6 in brackets
    ('an IPv6 ansible_host', {'sglang_server_host': '::', 'ansible_host': 'fd00::101'}, 8000, '::',
     'http://[::1]:8000', 'http://[fd00::101]:8000'),
]


@pytest.mark.parametrize('values, port, host, client, controller', [case[1:] for case in GOOD],
                         ids=[case[0] for case in GOOD])
def test_address(values, port, host, client, controller):
    found = one(**values)
    assert (found['port'], found['host'], found['client_url'], found['controller_url']) == \
        (port, host, client, controller)
    assert found['rank0'] == 'ct1'


def test_a_host_without_ansible_host_is_called_by_its_name():
    assert address({'ct1': {'sglang_server_host': '0.0.0.0'}}, 'ct1')['controller_url'] == 'http://ct1:8000'


def test_a_host_the_inventory_lacks_is_a_server_of_its_own():
    assert address({}, 'solo')['client_url'] == 'http://127.0.0.1:8000'


def test_the_defaults_are_the_role_argument_spec():
    assert defaults() == {'sglang_server_host': '127.0.0.1', 'sglang_server_port': 8000}


def node(rank, address_, **more):
    return dict({'sglang_server_name': 'duo', 'sglang_server_node_rank': rank, 'ansible_host': address_,
                 'sglang_server_host': '0.0.0.0', 'sglang_server_port': 30000}, **more)


def test_a_node_of_rank_above_0_calls_rank_0():
    hosts = {'ct1': node(0, '10.0.0.1'), 'ct3': node(1, '10.0.0.3'), 'ct2': {'ansible_host': '10.0.0.2'}}
    rank1 = address(hosts, 'ct3')
    assert rank1 == {'port': 30000, 'host': '0.0.0.0', 'client_url': 'http://10.0.0.1:30000',
                     'controller_url': 'http://10.0.0.1:30000', 'rank0': 'ct1', 'via': None}
    rank0 = address(hosts, 'ct1')
    assert (rank0['client_url'], rank0['controller_url']) == ('http://127.0.0.1:30000', 'http://10.0.0.1:30000')
    # rank 0 listed after its peer in the inventory: still its URL
    assert address({'ct3': hosts['ct3'], 'ct1': hosts['ct1']}, 'ct3')['client_url'] == 'http://10.0.0.1:30000'
    # the one-node server beside them is not touched
    assert address(hosts, 'ct2')['client_url'] == 'http://127.0.0.1:8000'


PCT = {'ansible_connection': 'community.proxmox.proxmox_pct_remote', 'proxmox_container_node': 'pve2',
       'ansible_host': '10.0.0.3'}


def test_a_container_reached_through_pct_has_no_controller_url_unless_it_binds_an_address():
    # its ansible_host is its hypervisor's: never taken for the server's address
    found = address({'ct4': dict(PCT, sglang_server_host='0.0.0.0')}, 'ct4')
    assert (found['client_url'], found['controller_url'], found['via']) == ('http://127.0.0.1:8000', None, 'pve2')
    found = address({'ct4': dict(PCT, sglang_server_host='10.9.0.4')}, 'ct4')
    assert (found['client_url'], found['controller_url'], found['via']) == \
        ('http://10.9.0.4:8000', 'http://10.9.0.4:8000', 'pve2')
    # the same values reached over SSH: the controller calls ansible_host
    assert one(sglang_server_host='0.0.0.0')['via'] is None


def test_rank_0_reached_through_pct_needs_the_address_the_other_nodes_reach_it_at():
    hosts = {'ct4': dict(PCT, **node(0, '10.0.0.3')), 'ct5': node(1, '10.0.0.5')}
    for host in hosts:
        with pytest.raises(AddressError) as error:
            address(hosts, host)
        assert 'rank 0 (ct4) of server duo is reached through its hypervisor' in str(error.value)
        assert "ansible_host is pve2's address: set sglang_server_dist_init_host" in str(error.value)
    hosts['ct4']['sglang_server_dist_init_host'] = '10.9.0.4'
    assert address(hosts, 'ct5')['client_url'] == 'http://10.9.0.4:30000'
    assert address(hosts, 'ct5')['controller_url'] is None and address(hosts, 'ct5')['via'] == 'pve2'
    assert address(hosts, 'ct4')['client_url'] == 'http://127.0.0.1:30000'
    hosts['ct4']['sglang_server_dist_init_host'] = 'not an address!'
    with pytest.raises(AddressError, match="sglang_server_dist_init_host='not an address!' of ct4"):
        address(hosts, 'ct5')


def test_a_node_of_rank_above_0_reached_through_pct_calls_rank_0_as_before():
    hosts = {'ct1': node(0, '10.0.0.1'), 'ct4': dict(node(1, '10.0.0.3'), **PCT)}
    assert address(hosts, 'ct4')['client_url'] == 'http://10.0.0.1:30000'
    assert address(hosts, 'ct4')['via'] is None


def test_rank_0_on_a_real_ipv6_address_is_called_there():
    hosts = {'ct1': node(0, '10.0.0.1', sglang_server_host='fd00::1'), 'ct3': node(1, '10.0.0.3')}
    assert address(hosts, 'ct3')['client_url'] == 'http://[fd00::1]:30000'


BAD = [
    ('port 0', {'sglang_server_port': 0}, 'sglang_server_port=0 is not a port; give an integer from 1 to 65535'),
    ('port 70000', {'sglang_server_port': 70000}, 'sglang_server_port=70000 is not a port'),
    ('a port that is true', {'sglang_server_port': True}, 'sglang_server_port=True is not a port'),
    ('a port that is a float', {'sglang_server_port': 8000.5}, 'sglang_server_port=8000.5 is not a port'),
    ('a port with a newline', {'sglang_server_port': '8000\n'}, "sglang_server_port='8000\\n' is not a port"),
    ('a port with a sign', {'sglang_server_port': '+80'}, "sglang_server_port='+80' is not a port"),
    # null would drop the flag: the server would take SGLang's own default port
    ('a port null', {'sglang_server_port': None}, "sglang_server_port=None is not a port"),
    ('a port out of range as a string', {'sglang_server_port': '65536'}, "sglang_server_port='65536' is not a port"),
    ('an IPv6 address in brackets', {'sglang_server_host': '[fd00::5]'},
     "sglang_server_host='[fd00::5]' is not an address to listen on; give an IPv4 or IPv6 address (without "
     "brackets), a host name, 0.0.0.0 or ::"),
    ('a host with a port', {'sglang_server_host': '10.0.0.9:8000'},
     "sglang_server_host='10.0.0.9:8000' is not an address to listen on"),
    ('a broken IPv6 address', {'sglang_server_host': 'fd00:::5'},
     "sglang_server_host='fd00:::5' is not an address to listen on"),
    ('a host with a newline', {'sglang_server_host': '0.0.0.0\n'},
     "sglang_server_host='0.0.0.0\\n' is not an address to listen on"),
    ('a host null', {'sglang_server_host': None}, 'sglang_server_host=None is not an address to listen on'),
    ('a host that is a number', {'sglang_server_host': 10}, 'sglang_server_host=10 is not an address to listen on'),
    ('a bad ansible_host', {'sglang_server_host': '0.0.0.0', 'ansible_host': '10.0.0.1 '},
     "ansible_host='10.0.0.1 ' of ct1 is not an address or host name"),
]


@pytest.mark.parametrize('values, message', [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_values_are_refused_naming_the_variable_and_value(values, message):
    with pytest.raises(AddressError) as caught:
        one(**values)
    assert message in str(caught.value)


def test_a_bad_rank_0_is_named_from_the_other_node():
    hosts = {'ct1': node(0, '10.0.0.1', sglang_server_host='[fd00::1]'), 'ct3': node(1, '10.0.0.3')}
    with pytest.raises(AddressError) as caught:
        address(hosts, 'ct3')
    assert "rank 0 (ct1) of server duo: sglang_server_host='[fd00::1]' is not an address" in str(caught.value)


@pytest.mark.parametrize('host, key, warned', [
    ('127.0.0.1', '', False), ('::1', '', False), ('localhost', '', False), ('127.0.0.2', '', False),
    ('0.0.0.0', '', True), ('::', '', True), ('', '', True), ('10.0.0.5', '', True),
    ('0.0.0.0', 'k3y', False),
])
def test_a_server_beyond_its_container_without_an_api_key_is_warned_of(host, key, warned):
    warning = exposure_warning({'host': host, 'port': 30000}, key)
    assert (warning is not None) is warned
    if warned:
        assert 'port 30000' in warning and 'sglang_server_api_key is empty' in warning
