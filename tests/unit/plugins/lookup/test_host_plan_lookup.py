"""The lookup host_plan (plugins/lookup/host_plan.py): this host's plan from its variables as the caller
sees them, the other extraction servers' from their hostvars; a default that reads the plan is the plan's
to compute (no recursion); a bad value fails naming the host, the variable and the value. In-process."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.eagle3.extraction.plugins.lookup.host_plan import LookupModule
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import PlanError, task_plan
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults

HOSTVARS = {
    'ct1': {'ansible_host': '10.0.0.1', 'sglang_server_host': '0.0.0.0', 'sglang_server_port': 30000,
            'unrelated': 'not read'},
    'ct2': {'ansible_host': '10.0.0.2'},
    'ct3': {'ansible_host': '10.0.0.3', 'sglang_server_name': 'duo', 'sglang_server_node_rank': 1,
            'sglang_server_host': '0.0.0.0'},
    'ct4': {'ansible_host': '10.0.0.4', 'sglang_server_name': 'duo', 'sglang_server_node_rank': 0,
            'sglang_server_host': '0.0.0.0', 'sglang_server_port': 8100},
}
# the job's defaults as its role has them: each reads the plan
JOB_DEFAULTS = dict((name, trust_as_template(value)) for name, value in spec_defaults('extraction_job', (
    'extraction_job_shard_indexes', 'extraction_job_shard_count', 'extraction_job_server_url',
    'extraction_job_dump_dir')).items())


def lookup(host, own=None, hostvars=None, **kwargs):
    hostvars = HOSTVARS if hostvars is None else hostvars
    variables = dict(hostvars.get(host, {}), inventory_hostname=host, hostvars=hostvars,
                     groups={'extraction_servers': list(HOSTVARS)}, **(own or {}))
    loader = DataLoader()
    plugin = LookupModule(loader=loader, templar=Templar(loader=loader, variables=variables))
    found = plugin.run(kwargs.pop('terms', []), variables=variables, **kwargs)
    assert len(found) == 1
    return found[0]


def test_the_inventory_values():
    address = lookup('ct1')['server']['address']
    assert (address['port'], address['client_url'], address['controller_url']) == (
        30000, 'http://127.0.0.1:30000', 'http://10.0.0.1:30000')


def test_the_callers_values_win_for_this_host_only():
    assert lookup('ct2', {'sglang_server_port': 18001, 'sglang_server_flags': {}})['server']['url'] == \
        'http://127.0.0.1:18001'
    # ct3 calls its rank 0, ct4, as ct4's hostvars say (8100), whatever ct3's role sees as its own port
    assert lookup('ct3', {'sglang_server_port': 8100})['server']['url'] == 'http://10.0.0.4:8100'


def test_the_jobs_defaults_read_the_plan_without_recursion():
    """The role's defaults (templates that call this lookup) are left to the plan; a given value wins."""
    found = lookup('ct1', JOB_DEFAULTS)['job']
    # one shard a server, by the servers' names sorted: ct1, ct2, duo
    assert (found['shards'], found['shard_count'], found['server_url'], found['dump_dir']) == (
        [0], 3, 'http://127.0.0.1:30000', '/dev/shm/sglang_hs')
    given = lookup('ct2', dict(JOB_DEFAULTS, extraction_job_shard_indexes=[1, 2],
                               extraction_job_server_url='http://127.0.0.1:9'))['job']
    assert (given['shards'], given['server_url']) == ([1, 2], 'http://127.0.0.1:9')
    assert given['output_dirs'] == {'1': '/srv/eagle3-extraction/extraction/shard-1-of-3',
                                    '2': '/srv/eagle3-extraction/extraction/shard-2-of-3'}


def test_the_jobs_server_unit_is_its_servers_as_the_plan_has_it():
    # extraction_job_server_unit's default reads the plan: sglang_server_unit's default is written in its record
    # only, not again in extraction_job's
    default = spec_defaults('extraction_job', ('extraction_job_server_unit',))['extraction_job_server_unit']
    assert default == "{{ lookup('eagle3.extraction.host_plan').server.unit }}"
    assert lookup('ct2')['server']['unit'] == spec_defaults('sglang_server', ('sglang_server_unit',))['sglang_server_unit']
    assert lookup('ct2', {'sglang_server_unit': 'sglang-kimi'})['server']['unit'] == 'sglang-kimi'


def test_templates_are_resolved_as_the_role_sees_them():
    found = lookup('ct2', {'sglang_server_tp_size': trust_as_template('{{ gpu_check_gpu_count }}'), 'gpu_check_gpu_count': 4,
                           'ml_env_path': '/opt/venv'})
    assert (found['server']['tp_size'], found['server']['local_tp'], found['python']) == (4, 4, '/opt/venv/bin/python')


def test_a_host_outside_the_group():
    hostvars = dict(HOSTVARS, molecule={'sglang_server_port': 18000})
    found = lookup('molecule', hostvars=hostvars)
    assert found['server']['url'] == 'http://127.0.0.1:18000'
    assert (found['server']['layout']['nodes'], found['job']['shards'], found['job']['shard_count']) == (
        ['molecule'], [0], 1)


@pytest.mark.parametrize('own, kwargs, message', [
    ({'sglang_server_port': 70000}, {}, "ct2: sglang_server_port=70000 is not a port; give an integer from 1 to 65535"),
    ({'sglang_server_flags': {'port': 30000}}, {},
     "ct2: sglang_server_flags['port'] is set; --port is sglang_server_port's: set that instead"),
    ({'sglang_server_host': 'fd00::5]'}, {}, "ct2: sglang_server_host='fd00::5]' is not"),
    ({}, {'terms': ['x']}, "host_plan takes no terms and no options (given: 'x')"),
    ({}, {'path': '/x'}, 'host_plan takes no terms and no options (given: path)'),
])
def test_bad_input_fails_naming_it(own, kwargs, message):
    with pytest.raises(AnsibleLookupError) as caught:
        lookup('ct2', own, **kwargs)
    assert message in str(caught.value)


@pytest.mark.parametrize('name', ['extraction_job_dump_dir', 'sglang_server_port'])
def test_a_value_that_reads_its_own_plan_is_refused_by_name(name):
    """Such a value would make the lookup call itself without end (twenty nested errors before this check): here
    the template function stands in for Ansible's, which runs the lookup again on such a value
    (tests/integration/test_host_plan_loop.py runs the real one)."""
    task_vars = dict(HOSTVARS['ct2'], inventory_hostname='ct2', hostvars=HOSTVARS,
                     groups={'extraction_servers': list(HOSTVARS)})
    task_vars[name] = 'reads the plan'

    def template(value):
        if value == 'reads the plan':
            try:
                task_plan(task_vars, template)
            except PlanError as exc:
                raise RuntimeError('the lookup failed: %s' % exc) from None   # as Ansible wraps it
        return value

    with pytest.raises(PlanError) as failed:
        task_plan(task_vars, template)
    assert str(failed.value) == ("ct2: %s='reads the plan' reads the host plan (lookup eagle3.extraction.host_plan), "
                                 "which is made of it; give it a value that does not read the plan" % name)
    # the next plan of the process is made as usual
    assert lookup('ct2')['server']['url'] == 'http://127.0.0.1:8000'
