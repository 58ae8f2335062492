"""Why extract.yml does not bring a host's server up (filter rollout_refusal): no inventory check (--limit without
localhost), a hypervisor not in the run, unreachable, or whose pct list failed; '' otherwise."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.rollout_refusal import FilterModule, rollout_refusal

LISTED = {'running': [101], 'containers': {}, 'rc': 0, 'stderr': ''}


def refusal(listed, checked=True):
    return rollout_refusal(listed, inventory_checked=checked, host='ct4', node='pve2', limit='ct4')


def test_the_filter_is_registered():
    assert set(FilterModule().filters()) == {'rollout_refusal'}


def test_nothing_stops_a_host_whose_hypervisor_listed_its_containers():
    assert refusal(LISTED) == ''


def test_a_limit_without_localhost_is_refused_first_naming_what_to_add():
    assert refusal(None, checked=False) == (
        "extract.yml's inventory check did not run, and nothing was changed: --limit (ct4) leaves out localhost, "
        "where the inventory check and the rollout table run. Name localhost and the containers' hypervisors beside "
        "the containers, for example --limit 'ct4,pve2,localhost'.")


def test_a_hypervisor_not_in_the_run():
    assert refusal(None) == ('hypervisor pve2 is unreachable: it is not in this run: name it in --limit beside its '
                             'containers')


def test_an_unreachable_hypervisor_with_its_cause():
    assert refusal({'unreachable': True, 'msg': ' Failed to connect \n'}) == (
        'hypervisor pve2 is unreachable: Failed to connect')
    assert refusal({'unreachable': True}) == 'hypervisor pve2 is unreachable: it was not reached'


def test_a_failing_pct_list_with_its_exit_code_and_error():
    assert refusal({'failed': True, 'rc': 2, 'stderr': 'ipcc_send_rec failed\n', 'msg': 'pct failed'}) == (
        'pct list failed on hypervisor pve2 (rc 2): ipcc_send_rec failed')
    assert refusal({'failed': True, 'rc': None, 'stderr': '', 'msg': 'timed out'}) == (
        'pct list failed on hypervisor pve2 (rc -): timed out')


def test_the_input_must_be_a_result_or_null():
    with pytest.raises(AnsibleFilterError, match='a pct_list result or null'):
        refusal('running')
