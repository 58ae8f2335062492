"""The filter sglang_server_address (plugins/filter/sglang_server_address.py): it reads each host's
variables from hostvars, lets the caller's own values (a role's defaults and parameters) win for the
host asked about, and fails naming the host, the variable and the value. In-process."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.sglang_server_address import sglang_server_address

HOSTVARS = {
    'ct1': {'ansible_host': '10.0.0.1', 'sglang_server_host': '0.0.0.0', 'sglang_server_flags': {'port': 30000},
            'unrelated': 'not read'},
    'ct2': {'ansible_host': '10.0.0.2'},
    'ct3': {'ansible_host': '10.0.0.3', 'sglang_server_name': 'duo', 'sglang_server_node_rank': 1,
            'sglang_server_host': '0.0.0.0'},
    'ct4': {'ansible_host': '10.0.0.4', 'sglang_server_name': 'duo', 'sglang_server_node_rank': 0,
            'sglang_server_host': '0.0.0.0', 'sglang_server_port': 8100},
}
HOSTS = list(HOSTVARS)


def test_the_inventory_values():
    found = sglang_server_address(HOSTS, HOSTVARS, 'ct1')
    assert (found['port'], found['client_url'], found['controller_url']) == (
        30000, 'http://127.0.0.1:30000', 'http://10.0.0.1:30000')


def test_the_callers_values_win_for_the_host_asked_about():
    found = sglang_server_address(HOSTS, HOSTVARS, 'ct2', {'sglang_server_port': 18001, 'sglang_server_flags': {}})
    assert found['client_url'] == 'http://127.0.0.1:18001'
    # not for the others: ct1 is as its hostvars say
    assert sglang_server_address(HOSTS, HOSTVARS, 'ct1', None)['port'] == 30000


def test_a_node_of_rank_1_calls_rank_0():
    assert sglang_server_address(HOSTS, HOSTVARS, 'ct3', {'sglang_server_port': 8100})['client_url'] == \
        'http://10.0.0.4:8100'


def test_a_host_outside_the_group():
    hostvars = dict(HOSTVARS, molecule={'sglang_server_port': 18000})
    assert sglang_server_address(HOSTS, hostvars, 'molecule')['client_url'] == 'http://127.0.0.1:18000'


@pytest.mark.parametrize('args, message', [
    ((HOSTS, HOSTVARS, 'ct2', {'sglang_server_flags': {'port': 70000}}),
     "ct2: sglang_server_flags['port']=70000 is not a port; give an integer from 1 to 65535"),
    ((HOSTS, HOSTVARS, 'ct2', {'sglang_server_host': 'fd00::5]'}), "ct2: sglang_server_host='fd00::5]' is not"),
    (('ct1', HOSTVARS, 'ct1'), 'the input must be the list of extraction servers'),
    ((HOSTS, HOSTVARS, 'ct1', ['port']), "values must be a dict of the host's variables"),
])
def test_bad_input_fails_naming_it(args, message):
    with pytest.raises(AnsibleFilterError) as caught:
        sglang_server_address(*args)
    assert message in str(caught.value)
