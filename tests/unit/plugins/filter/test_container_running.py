"""Whether a container is running by its hypervisor's pct list (filter container_running): the rule by which
converged_state compares a container, for extract.yml's dataset play, which must not contact a stopped one."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.container_running import FilterModule, container_running
from ansible_collections.eagle3.extraction.plugins.plugin_utils.converged_inputs import listed

LISTED = {'running': [101, 103], 'containers': {'101': 'running', '102': 'stopped', '103': 'running'},
          'config_states': {'101': 'abc'}, 'rc': 0, 'stderr': ''}


def test_the_filter_is_registered():
    assert set(FilterModule().filters()) == {'container_running'}


@pytest.mark.parametrize('vmid', [101, '101', 103])
def test_a_container_its_hypervisor_lists_as_running(vmid):
    assert container_running(LISTED, vmid) is True


@pytest.mark.parametrize('listing, vmid', [
    (LISTED, 102),                                              # stopped
    (LISTED, 104),                                              # not on this hypervisor
    (None, 101),                                                # the hypervisor is not in this run
    ({'unreachable': True, 'msg': 'Failed to connect'}, 101),   # unreachable
    ({'failed': True, 'rc': 2, 'stderr': 'pct: not found'}, 101),  # pct list failed
    ('not a result', 101),
])
def test_not_running_or_no_answer(listing, vmid):
    assert container_running(listing, vmid) is False


@pytest.mark.parametrize('listing, vmid', [(LISTED, 101), (LISTED, 102), (None, 101), ({'unreachable': True}, 103)])
def test_the_same_rule_as_the_converged_check(listing, vmid):
    assert container_running(listing, vmid) is (listed(listing, vmid)[0] is None)


@pytest.mark.parametrize('vmid', [0, -1, '', 'ct1', None, True, 1.5, '101\n', '1e3'])
def test_a_vmid_that_is_not_a_positive_integer_is_refused_naming_it(vmid):
    with pytest.raises(AnsibleFilterError, match=r'container_running: vmid must be a positive integer, not '):
        container_running(LISTED, vmid)
