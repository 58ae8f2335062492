"""The inventory check and each role's preflight give the same verdict on the same value.

Both paths are run as they run in a play, in-process and batched: the action plugin
inventory_check once over an inventory of one container per case (a bad value per host, every
host must be named; the good values, no error at all), and the action plugin role_input_check
(each role's preflight's first task) once per case with the role's defaults beside the value.
The values are test_role_inputs.py's (every variable with a rule, good and bad, a control
character in every string variable), the rules between variables, and the two the issue named:
a job name with '-' and a space margin above 1.
"""

from __future__ import annotations

import importlib.util
import os
import re
from unittest import mock

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.eagle3.extraction.plugins.action import inventory_check, role_input_check
from ansible_collections.eagle3.extraction.plugins.plugin_utils import role_inputs
from ansible_collections.eagle3.extraction.plugins.module_utils import shard_verify
from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_variables import extraction_job as extraction_job_variables

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
_SPEC = importlib.util.spec_from_file_location(
    'role_inputs_cases', os.path.join(HERE, 'plugins', 'plugin_utils', 'test_role_inputs.py'))
CASES_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(CASES_MODULE)

SPECS = role_inputs.load_specs()
ROLE_OF = dict((name, role) for role, options in SPECS.items() for name in options)

# a container the rules pass, which each case changes; its vmid is far from every case's
BASE = {'proxmox_container_node': 'pve1', 'sglang_server_model_path': '/srv/models/m',
        # a trainer's inputs (online_training refuses them empty; an extraction server is not asked for them)
        'online_training_job': 'demo', 'online_training_mooncake_master': 'mc1',
        'online_training_target_model_path': '/srv/models/m', 'online_training_draft_config': '/srv/draft/config.json',
        'online_training_vocab_mapping_path': '/srv/draft/vocab_mapping.pt',
        'online_training_dataset': '/srv/data/conversations.jsonl'}
VMID_BASE = 500000

# the rules between a variable and the inventory (a node of rank 1 needs a rank 0 node, a vmid is one
# container on its node) only inventory_check can see: their good values here are those of one container
# (an online job is good only with its trainer and master hosts beside it: the cross-host rules of
# plugins/plugin_utils/online_plan.py, tests/unit/plugins/plugin_utils/test_online_plan.py)
GOOD_OVERRIDES = {'sglang_server_node_rank': [0, '0'], 'proxmox_container_vmid': [100, 471, '472', 999999999],
                  'extraction_job_mode': ['files']}

BAD = [{name: value} for name, value in CASES_MODULE.CASES] + [
    {'extraction_job_name': 'sharegpt-v2'},            # rid <name>-<id>: the job refuses a '-'
    {'extraction_job_space_margin': 1.5},              # a fraction: the job checks 0 to 1
    {'extraction_job_space_margin': 10},
    {'extraction_job_shm_low': 0.8},                   # above the default high watermark (0.7)
    {'extraction_job_shm_low': 0.6, 'extraction_job_shm_high': 0.55},
    {'extraction_job_output_free_floor_gib': 20},      # above the default resume level (12)
    {'extraction_job_output_free_floor_gib': 8, 'extraction_job_output_free_resume_gib': 4},
    {'extraction_job_shard_indexes': [0, 3], 'extraction_job_shard_count': 3},
    {'extraction_job_shard_indexes': [1, 1], 'extraction_job_shard_count': 3},
    {'extraction_job_shard_indexes': [0], 'extraction_job_shard_count': 0},
    {'sglang_server_flags': {'tp-size': 8}},
    {'sglang_server_extra_args': ['--port', '9001', '9002']},
    {'sglang_server_flags': {'mem-fraction-static': 1.2}},
    {'ml_env_wheelhouse_src': '/srv/wheels'},
    {'mooncake_master_wheelhouse_src': '/srv/wheels'},
    {'mooncake_master_rpc_port': 35880},
    {'mooncake_master_metrics_port': 35551, 'mooncake_master_segment_port': 35551},
    # a dataset that is not on the controller (the role refused it after the servers were deployed)
    {'extraction_job_dataset': '/nonexistent/eagle3-dataset.jsonl'},
    {'extraction_job_dataset': '/nonexistent/eagle3-dataset.jsonl', 'extraction_job_dataset_on_host': 'no'},
    {'extraction_job_dataset': '/'},
    # a job dump dir that is not the server's: every sample waits its ack timeout
    {'extraction_job_dump_dir': '/dev/shm/elsewhere', 'sglang_server_dump_dir': '/dev/shm/sglang_hs'},
    {'extraction_job_dump_dir': '/dev/shm/sglang_hs', 'sglang_server_dump_dir': '/dev/shm/moved'},
    # a hypervisor that is not a host of the inventory (the role was an assert of its own)
    {'gpu_check_hypervisor': 'pve9'},
    # dirs another package owns, units the system has: owned_paths refused them once the container was up
    {'extraction_job_config_dir': '/etc/ssl/private'},
    {'extraction_job_data_dir': '/etc/ssl/private'},
    {'extraction_job_log_dir': '/var/log/journal'},
    {'extraction_job_install_dir': '/var/lib/dpkg/x'},
    {'extraction_job_output_root': '/var/log/journal'},
    {'extraction_job_unit': 'user'},
    {'extraction_job_unit': 'getty'},
    {'extraction_job_gateway_unit': 'systemd-journald'},
    {'sglang_server_unit': 'user@1000'},
    # output inside the server's dump dir (a tmpfs, moved aside with the dumps by the server's reclaim)
    {'extraction_job_output_root': '/data/dumps/out', 'sglang_server_dump_dir': '/data/dumps'},
    {'extraction_job_output_root': '/data/dumps', 'sglang_server_dump_dir': '/data/dumps/'},
]
GOOD = [{name: value} for name, values in CASES_MODULE.GOOD.items()
        for value in GOOD_OVERRIDES.get(name, values)] + [
    {'extraction_job_name': 'sharegpt_v2'},
    {'extraction_job_space_margin': 1},
    {'extraction_job_space_margin': 0},
    {'extraction_job_shm_low': 0.6, 'extraction_job_shm_high': 0.9},
    {'extraction_job_output_free_floor_gib': 2, 'extraction_job_output_free_resume_gib': 2},
    {'extraction_job_shard_indexes': [0, 2], 'extraction_job_shard_count': 3},
    {'sglang_server_flags': {'mem-fraction-static': 0.85}},
    {'ml_env_wheelhouse_src': '/srv/wheels', 'ml_env_wheelhouse': '/root/wheels'},
    {'mooncake_master_wheelhouse_src': '/srv/wheels', 'mooncake_master_wheelhouse': '/root/wheels'},
    {'mooncake_master_rpc_port': 35552, 'mooncake_master_metadata_port': 35553, 'mooncake_master_metrics_port': 35554,
     'mooncake_master_segment_port': 35555},
    # on the controller (this file), or on the host: not read here
    {'extraction_job_dataset': os.path.abspath(__file__)},
    {'extraction_job_dataset': '/nonexistent/eagle3-dataset.jsonl', 'extraction_job_dataset_on_host': True},
    {'extraction_job_dataset': ''},
    {'extraction_job_dump_dir': '/dev/shm/moved', 'sglang_server_dump_dir': '/dev/shm/moved/'},
    {'gpu_check_hypervisor': 'pve1'},
    {'gpu_check_hypervisor': ''},
    {'extraction_job_output_root': '/data/dumps2', 'sglang_server_dump_dir': '/data/dumps'},
]


def plain_defaults(role):
    with open(os.path.join(REPO, 'roles', role, 'defaults', 'main.yml')) as f:
        defaults = yaml.safe_load(f) or {}
    return dict((k, v) for k, v in defaults.items() if '{{' not in repr(v))


DEFAULTS = dict((role, plain_defaults(role)) for role in role_inputs.ROLES)


def run_action(module, args, task_vars):
    task = mock.MagicMock()
    task.args = args
    task.action = 'eagle3.extraction.' + module.__name__.rsplit('.', 1)[-1]
    templar = Templar(loader=DataLoader(), variables=task_vars)
    plugin = module.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=DataLoader(), templar=templar,
                                 shared_loader_obj=None)
    with mock.patch.object(inventory_check.ControllerCheck.__mro__[1], 'run', return_value={}):
        return plugin.run(task_vars=task_vars)


def host_name(index):
    return 'ct%05d' % index


def inventory_verdicts(cases):
    """{index: the inventory check's errors naming that case's host}, from one inventory_check run."""
    hostvars = {}
    for index, case in enumerate(cases):
        hostvars[host_name(index)] = dict(dict(BASE, proxmox_container_vmid=VMID_BASE + index), **case)
    result = run_action(inventory_check, {'hosts': sorted(hostvars), 'hypervisors': ['pve1'], 'rollout': {}},
                        {'hostvars': dict(hostvars, pve1={})})
    errors = result.get('errors', [])
    named = {}
    for index in range(len(cases)):
        word = re.compile(r'\b%s\b' % host_name(index))
        named[index] = [error for error in errors if word.search(error)]
    return result, named


def role_verdict(case):
    """role_input_check's errors for the role of case's variables, the role's plain defaults beside."""
    # a rule across two roles (ACROSS_ROLES) is the first name's role's; the play has the other's value
    roles = set(ROLE_OF[name] for name in case if name not in role_inputs.ACROSS_NAMES) or set(
        ROLE_OF[name] for name in case)
    assert len(roles) == 1, case
    role = roles.pop()
    task_vars = dict(DEFAULTS[role], **BASE)
    task_vars.update(proxmox_container_vmid=VMID_BASE)
    task_vars.update(case)
    # the play's inventory: the node is a host of it (the role checks that too)
    task_vars.update(inventory_hostname=host_name(0), hostvars={'pve1': {}})
    result = run_action(role_input_check, {'role': role}, task_vars)
    return result.get('errors', []) if result.get('failed') else []


@pytest.fixture(scope='module', autouse=True)
def cached_specs():
    with mock.patch.object(role_input_check, 'load_specs', return_value=SPECS), \
            mock.patch.object(inventory_check, 'load_specs', return_value=SPECS):
        yield


def test_the_cases_cover_every_variable_with_a_rule_and_the_named_ones():
    bad = set(name for case in BAD for name in case)
    good = set(name for case in GOOD for name in case)
    assert set(role_inputs.RULES) <= bad
    assert set(name for rule in role_inputs.CROSS_RULES for name in rule.names) <= bad & good
    assert {'extraction_job_name': 'sharegpt-v2'} in BAD and {'extraction_job_space_margin': 1.5} in BAD
    assert len(BAD) >= 500 and len(GOOD) >= 60


def test_the_base_container_passes_both():
    result = inventory_verdicts([{}])[0]
    assert not result.get('failed'), result['msg']
    for role in role_inputs.ROLES:
        assert not run_action(role_input_check, {'role': role},
                              dict(DEFAULTS[role], proxmox_container_vmid=VMID_BASE, inventory_hostname=host_name(0),
                                   hostvars={'pve1': {}}, **BASE)).get('failed')


def test_a_bad_value_is_refused_by_both_naming_it():
    named = inventory_verdicts(BAD)[1]
    disagree = []
    for index, case in enumerate(BAD):
        role = role_verdict(case)
        inventory = named[index]
        # both refuse, and each says which variable
        if not (role and inventory and any(name in ' '.join(role) and name in ' '.join(inventory) for name in case)):
            disagree.append('%r: inventory %s, role %s' % (case, inventory or 'passes', role or 'passes'))
    assert disagree == []


@pytest.mark.parametrize('ansible_host', ['a;b', 'a\nb', '--help', 'node_1'])
def test_an_ansible_host_that_is_no_address_is_refused_by_both(ansible_host):
    """Before, the inventory check named it only where a plan read it (a wildcard or loopback bind host): with a
    real bind address it passed, and the roles refused it once the container and the server had been deployed."""
    case = {'ansible_host': ansible_host, 'sglang_server_host': '10.0.0.9'}
    expected = 'ansible_host=%r of %s is not an address or host name' % (ansible_host, host_name(0))
    assert inventory_verdicts([case])[1][0] == ['%s: %s' % (host_name(0), expected)]
    for role in ('proxmox_container', 'extraction_job', 'sglang_server'):
        task_vars = dict(DEFAULTS[role], proxmox_container_vmid=VMID_BASE, inventory_hostname=host_name(0),
                         hostvars={'pve1': {}}, **BASE)
        task_vars.update(case)
        result = run_action(role_input_check, {'role': role}, task_vars)
        assert result.get('failed') and expected in result['errors'], (role, result.get('errors'))


# port, bind host, tp-size and model path are their variables' alone: set another way, one message names the variable
CORE_FLAG_CASES = [
    {'sglang_server_flags': {'port': 30000}},
    {'sglang_server_flags': {'host': '::', 'mem-fraction-static': 0.8}},
    {'sglang_server_flags': {'tp-size': 8}},
    {'sglang_server_flags': {'model-path': '/srv/models/m'}},
    {'sglang_server_extra_args': ['--port', '9001', '9002']},
    {'sglang_server_extra_args': ['--enable-metrics', '--host=0.0.0.0']},
]


def test_a_core_flag_set_another_way_gets_the_same_message_from_both():
    named = inventory_verdicts(CORE_FLAG_CASES)[1]
    for index, case in enumerate(CORE_FLAG_CASES):
        role = role_verdict(case)
        assert len(role) == 1 and "'s: set that instead" in role[0], (case, role)
        assert named[index] == ['%s: %s' % (host_name(index), role[0])], (case, named[index])


def test_a_good_value_passes_both():
    result = inventory_verdicts(GOOD)[0]
    assert not result.get('failed'), result['msg']
    assert sorted(result['plans']) == [host_name(index) for index in range(len(GOOD))]
    refused = ['%r: %s' % (case, role_verdict(case)) for case in GOOD if role_verdict(case)]
    assert refused == []


# ------------------------------------------------------------------ the job reads the same rules

JOB_FILES = os.path.join(REPO, 'roles', 'extraction_job', 'files')
# the job's config key each variable becomes (roles/extraction_job/vars/main.yml) and the conversion there
JOB_KEYS = {
    'extraction_job_name': ('job', str),
    'extraction_job_shard_count': ('shard_count', int),
    'extraction_job_server_url': ('server_url', str),
    'extraction_job_hidden_size': ('hidden_size', int),
    'extraction_job_captured_layers': ('captured_layers', int),
    'extraction_job_max_length': ('max_length', int),
    'extraction_job_concurrency': ('concurrency', int),
    'extraction_job_request_timeout': ('request_timeout', float),
    'extraction_job_max_attempts': ('max_attempts', int),
    'extraction_job_ack_timeout': ('ack_timeout', float),
    'extraction_job_stall_window': ('stall_window', float),
    'extraction_job_stall_restarts_max': ('stall_restarts_max', int),
    'extraction_job_drain_workers': ('drain_workers', int),
    'extraction_job_shm_high': ('shm_high', float),
    'extraction_job_shm_low': ('shm_low', float),
    'extraction_job_output_free_floor_gib': ('output_free_floor_bytes', lambda v: int(float(v) * 1073741824)),
    'extraction_job_output_free_resume_gib': ('output_free_resume_bytes', lambda v: int(float(v) * 1073741824)),
    'extraction_job_space_margin': ('space_margin', float),
    'extraction_job_accept_failed': ('accept_failed', list),
    'extraction_job_metrics_dir': ('metrics_dir', str),
}


@pytest.fixture(scope='module')
def job_config():
    """The job's config module (stdlib only), imported from the role's files as the venv's pip install has it."""
    import sys  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, JOB_FILES)
    try:
        from eagle3_extraction_job import config, names  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(JOB_FILES)
    return config, names


def job_errors(config, case):
    values = dict(DEFAULTS['extraction_job'], **case)
    raw = {'dataset': '/var/lib/eagle3-extraction/x.jsonl', 'output_dir': '/srv/eagle3-extraction/x/shard-0-of-1',
           'server_url': 'http://127.0.0.1:30000', 'shard_index': 0, 'shard_count': 1}
    for name, (key, convert) in JOB_KEYS.items():
        if name in values:
            raw[key] = convert(values[name])
    for index in case.get('extraction_job_shard_indexes', []):
        try:
            config.from_dict(dict(raw, shard_index=int(index)))
        except config.ConfigError as exc:
            return [str(exc)]
    try:
        config.from_dict(raw)
    except config.ConfigError as exc:
        return [str(exc)]
    return []


def test_the_job_name_rule_is_the_jobs(job_config):
    names = job_config[1]
    assert extraction_job_variables.JOB_NAME.pattern == names.JOB_RE.pattern


def test_the_sample_id_rule_of_extraction_job_accept_failed_is_the_jobs(job_config):
    names = job_config[1]
    assert shard_verify.SAMPLE_ID.pattern == names.SAMPLE_ID_RE.pattern


# (shard indexes without their count: the count's default is the inventory's, a template here)
JOB_CASES = [case for case in BAD + GOOD if set(case) <= set(JOB_KEYS) | {'extraction_job_shard_indexes'}
             and ('extraction_job_shard_count' in case or 'extraction_job_shard_indexes' not in case)]


@pytest.mark.parametrize('case', JOB_CASES, ids=[repr(case) for case in JOB_CASES])
def test_what_the_table_lets_through_the_job_takes(job_config, case):
    """Nothing the inventory check and the preflight let through is refused by the job after the
    servers were deployed (the job name with '-' and a margin of 1.5 were)."""
    config = job_config[0]
    table = role_inputs.role_value_errors(SPECS['extraction_job'], case)
    if not table:
        assert job_errors(config, case) == []


def test_the_named_disagreements_are_refused_by_table_and_job(job_config):
    config = job_config[0]
    for case in ({'extraction_job_name': 'sharegpt-v2'}, {'extraction_job_space_margin': 1.5},
                 {'extraction_job_shm_low': 0.8},
                 {'extraction_job_shard_indexes': [0, 3], 'extraction_job_shard_count': 3}):
        assert role_inputs.role_value_errors(SPECS['extraction_job'], case), case
        assert job_errors(config, case), case


# ------------------------------------------------------------------ the preflights hold no copy of a rule

@pytest.mark.parametrize('role', role_inputs.ROLES)
def test_each_preflight_starts_with_the_table_and_asserts_no_rule_of_it(role):
    with open(os.path.join(REPO, 'roles', role, 'tasks', 'preflight.yml')) as f:
        tasks = yaml.safe_load(f)
    assert tasks[0].get('eagle3.extraction.role_input_check') == {'role': role}
    for task in tasks:
        that = (task.get('ansible.builtin.assert') or {}).get('that', [])
        text = ' '.join(that if isinstance(that, list) else [that])
        # a value's own rule (a pattern, a range) on a variable of the table is the table's
        repeated = [name for name in role_inputs.RULES
                    if re.search(r'\b%s\b\s*(\|\s*(int|float|string)\s*)?(is match|>|<|==|!=)' % name, text)]
        assert repeated == [], '%s: %s' % (task.get('name'), repeated)
