"""The capture gateway's config the extraction_job role writes in the online mode: every address, port, URL and
dir is the host plan's online section's, the settings are converted from what an inventory gives, and the gateway
itself (eagle3_extraction_job/gateway_config.py, imported from the role's files) takes the result."""

import copy
import re
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.capture_gateway import FilterModule, capture_gateway_config
from ansible_collections.eagle3.extraction.plugins.plugin_utils.capture_gateway import (
    SETTINGS, GatewayConfigError, gateway_config)

JOB_FILES = Path(__file__).resolve().parents[4] / 'roles' / 'extraction_job' / 'files'
ROLE_VARS = JOB_FILES.parent / 'vars' / 'main.yml'

# the plan's online section of a server's rank-0 host, as design Round 2 fixes it
ONLINE = {
    'job': 'chat_v1',
    'master': {'host': 'mc1', 'address': '10.0.0.9', 'rpc_port': 35551, 'metadata_port': 35880,
               'metrics_port': 35903, 'segment_port': 50052, 'segment_bytes': 32 << 30,
               'master_server_address': '10.0.0.9:35551', 'metadata_server': 'http://10.0.0.9:35880/metadata',
               'metrics_url': 'http://10.0.0.9:35903/metrics'},
    'trainer': 'trainer1',
    'server_urls': ['http://10.0.0.2:30100', 'http://10.0.0.3:30100'],
    'aux_layer_ids': [2, 18, 33],
    'environment': {'MC_TCP_BIND_ADDRESS': '10.0.0.2', 'MOONCAKE_LOCAL_HOSTNAME': '10.0.0.2',
                    'MOONCAKE_MASTER_SERVER_ADDR': '10.0.0.9:35551',
                    'MOONCAKE_METADATA_SERVER': 'http://10.0.0.9:35880/metadata', 'MOONCAKE_PROTOCOL': 'tcp'},
    'gateway': {'listen_host': '0.0.0.0', 'port': 30100, 'url': 'http://10.0.0.2:30100',
                'server_url': 'http://127.0.0.1:30000', 'dump_dir': '/dev/shm/sglang_hs',
                'unit': 'eagle3-capture-gateway@chat_v1.service'},
}
# as an inventory gives them: strings where the role's defaults are numbers
SETTINGS_GIVEN = {
    'rejected_dir': '/srv/eagle3-extraction/chat_v1/gateway-rejected',
    'api_key_file': '/etc/eagle3-extraction/chat_v1.key',
    'hidden_size': '0', 'request_timeout': '600', 'ack_timeout': 600.0, 'max_prompts': 1024,
    'store_threads': '8', 'stop_timeout': 120, 'local_buffer_bytes': '536870912', 'server_wait': '45',
}


@pytest.fixture(scope='module')
def gateway_module():
    """The gateway's own config module (stdlib only), from the role's files, as pip installs it on the host."""
    sys.path.insert(0, str(JOB_FILES))
    try:
        from eagle3_extraction_job import config, gateway_config as module  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(str(JOB_FILES))
    return module, config


def test_the_filter_is_registered():
    assert FilterModule().filters() == {'capture_gateway_config': capture_gateway_config}


def test_every_address_is_the_plan_s_and_the_settings_are_typed():
    made = gateway_config(ONLINE, SETTINGS_GIVEN)
    assert made == {
        'job': 'chat_v1', 'server_url': 'http://127.0.0.1:30000', 'dump_dir': '/dev/shm/sglang_hs',
        'listen_host': '0.0.0.0', 'listen_port': 30100,
        'mooncake': {'local_hostname': '10.0.0.2', 'metadata_server': 'http://10.0.0.9:35880/metadata',
                     'master_server_address': '10.0.0.9:35551', 'protocol': 'tcp', 'local_buffer_size': 536870912},
        'rejected_dir': '/srv/eagle3-extraction/chat_v1/gateway-rejected',
        'api_key_file': '/etc/eagle3-extraction/chat_v1.key', 'hidden_size': 0, 'request_timeout': 600.0,
        'ack_timeout': 600.0, 'max_prompts': 1024, 'store_threads': 8, 'stop_timeout': 120.0,
        'server_wait': 45.0, 'layer_ids': [2, 18, 33]}


def test_the_gateway_takes_what_the_role_writes(gateway_module):
    module, _config = gateway_module
    loaded = module.from_dict(gateway_config(ONLINE, SETTINGS_GIVEN))
    assert loaded.layer_ids == [2, 18, 33]
    assert loaded.mooncake.local_hostname == '10.0.0.2'
    assert loaded.listen_port == 30100 and loaded.store_threads == 8
    # how long a prompt waits for its restarting server: the role's extraction_job_gateway_server_wait
    assert loaded.server_wait == 45.0


def test_the_role_places_every_setting_from_its_variable():
    with open(ROLE_VARS, encoding='utf-8') as stream:
        settings = yaml.safe_load(stream)['__extraction_job_gateway_settings']
    assert set(settings) == set(SETTINGS)
    assert settings['server_wait'] == '{{ extraction_job_gateway_server_wait }}'


def test_no_aux_layer_ids_in_the_plan_leaves_the_capture_s_default(gateway_module):
    module, _config = gateway_module
    online = dict(ONLINE, aux_layer_ids=None)
    made = gateway_config(online, SETTINGS_GIVEN)
    assert 'layer_ids' not in made
    # the capture's default ids (sglang_patch's eagle3_hs_capture.py: SpecForge's 1,29,57) are the gateway's
    capture = (JOB_FILES.parents[1] / 'sglang_patch' / 'files' / 'eagle3_hs_capture.py').read_text()
    defaults = re.search(r'^DEFAULT_LAYER_IDS = \(([0-9, ]+)\)$', capture, re.M).group(1)
    assert module.from_dict(made).layer_ids == [int(layer) for layer in defaults.split(',')]


@pytest.mark.parametrize('online,expected', [
    (None, 'takes no part in an online job'),
    (dict(ONLINE, gateway=None), "not a server's rank-0 host"),
    (dict(ONLINE, master={'host': 'mc1'}), 'no master.metadata_server'),
    (dict(ONLINE, environment={}), 'no environment.MOONCAKE_LOCAL_HOSTNAME'),
    (dict(ONLINE, aux_layer_ids='1,29,57'), 'not a list of layer ids'),
])
def test_a_plan_without_a_gateway_is_named(online, expected):
    with pytest.raises(GatewayConfigError, match=expected):
        gateway_config(online, SETTINGS_GIVEN)
    with pytest.raises(AnsibleFilterError, match='capture_gateway_config: .*' + expected):
        capture_gateway_config(online, SETTINGS_GIVEN)


@pytest.mark.parametrize('change,expected', [
    ({'store_threads': 'eight'}, 'store_threads=.eight. is not a int'),
    ({'stop_timeout': True}, 'stop_timeout=True is not a float'),
    ({'bogus': 1}, 'must be exactly'),
])
def test_a_setting_of_another_type_or_name_is_named(change, expected):
    settings = dict(SETTINGS_GIVEN, **change)
    with pytest.raises(GatewayConfigError, match=expected):
        gateway_config(ONLINE, settings)


def test_a_missing_setting_is_named():
    settings = copy.deepcopy(SETTINGS_GIVEN)
    del settings['hidden_size']
    with pytest.raises(GatewayConfigError, match='must be exactly'):
        gateway_config(ONLINE, settings)


def test_every_setting_is_a_key_the_gateway_knows(gateway_module):
    module, _config = gateway_module
    known = set(module.GatewayConfig.__dataclass_fields__) | {'local_buffer_bytes'}
    assert set(SETTINGS) <= known
