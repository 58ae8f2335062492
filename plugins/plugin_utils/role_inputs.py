# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each role variable may hold, checked on the controller before any host is touched.

A role's meta/argument_specs.yml gives each variable's type and choices (Ansible's
ArgumentSpecValidator enforces them, here and when the role starts); what that format cannot
say - ranges, whole-value patterns, paths that must not be system directories - is RULES
below, one entry per variable; the rules between variables of a role (a low watermark at most the
high one, a shard index below the count) are CROSS_RULES, and the variables a container must set
REQUIRED. This is the one place of these rules: inventory_check (every host of an inventory),
role_input_check (each role's preflight, its first task) and, through a unit test, the job's
config agree on them. Every string anywhere in a value is also refused when it
holds a control character (a newline in a value splits a config line or a command line in
two), except the newlines and tabs of the chat template's text (TEMPLATE_TEXT), which only
the job's JSON config holds. inventory_check (an action plugin) applies both to every host of an inventory, and adds
the rules across hosts (cross_host_errors) and the rollout's (rollout_errors).

Each check returns messages that name the host, the variable and its value; secrets
(no_log in the spec) are never shown.
"""

from __future__ import annotations

import copy
import math
import os
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.eagle3.extraction.plugins.module_utils.pct import (
    HOSTNAME_RE, OSTEMPLATE_RE, SHM_SIZE_RE, SSH_KEY_RE, STORAGE_RE)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_config import (
    ServerConfigError, bad_character, check_api_key, checked_flags, environment_lines, parse_extra_args)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_layout import servers
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import COLLECTION, role_options
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import VMID_MAX, VMID_MIN, inventory_int, show

ROLES = ('proxmox_container', 'gpu_check', 'ml_env', 'sglang_patch', 'sglang_server', 'extraction_job')

# Directories a venv, a dump dir or a log must not be (nor the parent of a removed tree).
SYSTEM_DIRS = frozenset([
    '/', '/bin', '/boot', '/dev', '/etc', '/home', '/lib', '/lib32', '/lib64', '/libx32', '/media', '/mnt', '/opt',
    '/proc', '/root', '/run', '/sbin', '/srv', '/sys', '/tmp', '/usr', '/usr/bin', '/usr/lib', '/usr/lib64',
    '/usr/local', '/usr/local/bin', '/usr/local/lib', '/usr/sbin', '/usr/share', '/var', '/var/lib', '/var/log',
    '/var/tmp', '/dev/shm', '/etc/sglang', '/var/log/sglang',
])
# Trees nothing of ours may live in (of /dev, only /dev/shm holds files of ours).
SYSTEM_TREES = ('/proc/', '/sys/', '/boot/')

DOTTED_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*')
UNIT_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9:_.@-]{0,200}')
# a template unit's prefix, which the role makes <name>@.service of: no '@', no suffix
TEMPLATE_UNIT_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9:_.-]{0,200}(?<!\.service)')
DRIVER_VERSION = re.compile(r'[0-9]{1,4}(\.[0-9]{1,4}){0,2}')
HOST = re.compile(r'[A-Za-z0-9_.:-]{1,253}')
NODE_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}')
NET_KEY = re.compile(r'net[0-9]{1,2}')
# a requirement spec as pip reads it, never an option (-e, --index-url...)
REQUIREMENT = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*([<>=!~]=?=?\s*[A-Za-z0-9.*+!_-]+'
                         r'\s*,?\s*)*(\s*;\s*[^;]+)?|[A-Za-z0-9][A-Za-z0-9._-]*\s*@\s*\S+')
# a stale-segment glob names a prefix: letters first, at most one * and only at the end
SHM_PATTERN = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{1,99}\*?')
DEVICE = re.compile(r'/dev/[A-Za-z0-9_./-]+(,(gid|uid|mode)=[0-9]+)*')
RAW_LXC = re.compile(r'lxc\.[a-z0-9_.]+\s*[:=]\s*\S.*')
# NCCL_SOCKET_IFNAME's forms: eth0, eth0,eth1, =eth0 (exact), ^docker,lo (excluded prefixes)
IFNAMES = re.compile(r'[=^]?[A-Za-z0-9_.:@-]{1,15}(,[A-Za-z0-9_.:@-]{1,15})*')
SERVER_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,62}')
# the job's own rule (eagle3_extraction_job/names.py JOB_RE; a unit test holds them equal): no '-',
# since a rid is <name>-<sample id> and the first '-' of a dump's name separates the two
JOB_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.]{0,63}')
URL = re.compile(r'https?://[^\s/?#]+[^\s]*')
DECIMAL = re.compile(r'[0-9]+(\.[0-9]*)?|\.[0-9]+')
SHARDS_MAX = 100000
FEATURES = {'nesting', 'keyctl', 'fuse', 'mount', 'mknod', 'force_rw_sys'}


class Rule:
    """One variable's rule beyond its type: fn(value) -> a reason or None."""

    def __init__(self, check, what):
        self.check = check
        self.what = what


def _number(minimum, maximum, unit=''):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return 'not a number'
        if isinstance(value, float) and not math.isfinite(value):
            return 'not a finite number'
        if not minimum <= value <= maximum:
            return 'out of range'
        return None
    return Rule(check, 'a number from %s to %s%s' % (minimum, maximum, ' ' + unit if unit else ''))


def _pattern(regex, what, empty=False):
    def check(value):
        if empty and value == '':
            return None
        if not isinstance(value, str) or not regex.fullmatch(value):
            return 'not allowed'
        return None
    return Rule(check, what + (' (or empty)' if empty else ''))


def _path_error(value, empty=False, suffixes=None):
    if empty and value == '':
        return None
    if not isinstance(value, str) or not value.startswith('/') or '\\' in value:
        return 'not an absolute path'
    parts = value.split('/')
    if '..' in parts or '.' in parts or '//' in value or re.search(r'\s', value):
        return 'not a plain absolute path'
    normal = value.rstrip('/') or '/'
    if normal in SYSTEM_DIRS or (normal + '/').startswith(SYSTEM_TREES) or (
            normal.startswith('/dev/') and not normal.startswith('/dev/shm/')):
        return 'a system directory'
    if suffixes and not normal.endswith(suffixes):
        return 'not a %s file' % ' or '.join(suffixes)
    return None


def _path(empty=False, suffixes=None, what='an absolute path that is not a system directory'):
    return Rule(lambda value: _path_error(value, empty, suffixes), what + (' (or empty)' if empty else ''))


def _each(rule):
    def check(value):
        if not isinstance(value, (list, tuple)):
            return 'not a list'
        for index, item in enumerate(value):
            reason = rule.check(item)
            if reason:
                return 'refused at item %d (%s: %s)' % (index, show(item), reason)
        return None
    return Rule(check, 'a list, each item ' + rule.what)


def _vmid(allow_zero):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int):
            return 'not an integer'
        if allow_zero and value == 0:
            return None
        return None if VMID_MIN <= value <= VMID_MAX else 'out of range'
    return Rule(check, 'an integer from %d to %d%s' % (VMID_MIN, VMID_MAX, ' (0: none)' if allow_zero else ''))


def _gpus(value):
    if value == 'all':
        return None
    if not isinstance(value, (list, tuple)) or not value:
        return "neither 'all' nor a list of GPU indexes"
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= 63:
            return 'item %s is not a GPU index from 0 to 63' % show(item)
    return None


def _net(value):
    for key, item in value.items():
        if not isinstance(key, str) or not NET_KEY.fullmatch(key):
            return 'has the key %s (netN)' % show(key)
        if not isinstance(item, (str, dict)):
            return '%s is neither a property string nor a dict' % key
    return None


def _features(value):
    for key, item in value.items():
        if key not in FEATURES:
            return 'has the feature %s (%s)' % (show(key), ', '.join(sorted(FEATURES)))
        if not isinstance(item, bool):
            return '%s: %s is not a boolean' % (key, show(item))
    return None


def _tp_size(value):
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, str) and re.fullmatch(r'[0-9]{1,3}', value):
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= 256:
        return 'not an integer from 1 to 256'
    return None


def _server_config(function):
    """A check of plugin_utils/server_config.py as a rule: its message, which names the variable, or None."""
    def check(value):
        try:
            function(value)
        except ServerConfigError as exc:
            return str(exc)
        return None
    return check


def _env_over_defaults(env):
    """sglang_server_env as the unit will hold it over the defaults: a null value drops a default (the plan
    leaves it out), every other value is rendered as an Environment= line."""
    if isinstance(env, dict):
        env = dict((name, value) for name, value in env.items() if value is not None)
    return environment_lines(env)


def _fraction(value):
    """value as a number when it is one (or a decimal string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and DECIMAL.fullmatch(value):
        return float(value)
    return None


def _flags(value):
    """sglang_server_flags: the config file's rules (none of the four flags of their own variables), then the
    value of a flag the role reads itself."""
    reason = _server_config(checked_flags)(value)
    if reason:
        return reason
    fraction = value.get('mem-fraction-static')
    if fraction not in (None, '') and not 0 < (_fraction(fraction) or 0) < 1:
        return ("sglang_server_flags['mem-fraction-static']=%s is not a number strictly between 0 and 1 (the share "
                "of each GPU's memory for weights and KV cache)" % show(fraction))
    return None


def _shard_count(value):
    count = _as_int(value)
    if count is None:
        return 'not an integer'
    return None if 1 <= count <= SHARDS_MAX else 'out of range'


def _shard_indexes(value):
    if not isinstance(value, (list, tuple)) or not value:
        return 'not a non-empty list'
    seen = set()
    for item in value:
        index = _as_int(item)
        if index is None or not 0 <= index < SHARDS_MAX:
            return 'refused at %s (not a shard index: an integer from 0)' % show(item)
        if index in seen:
            return 'refused at %s (given twice: a shard is sent once)' % show(item)
        seen.add(index)
    return None


def _api_key(value):
    if not isinstance(value, str):
        return 'sglang_server_api_key is a %s; it must be a string (quote it)' % type(value).__name__
    return _server_config(check_api_key)(value)


RULES = {
    # proxmox_container: pve-container's ranges and formats, as pct_container checks them
    # required: cross_host_errors says so once
    'proxmox_container_node': _pattern(NODE_NAME, 'the inventory name of a proxmox_hypervisors host', empty=True),
    'proxmox_container_vmid': _vmid(allow_zero=False),
    'proxmox_container_ostemplate': _pattern(OSTEMPLATE_RE, '<storage>:vztmpl/<file> or an absolute path', empty=True),
    'proxmox_container_storage': _pattern(STORAGE_RE, 'a Proxmox storage id'),
    'proxmox_container_rootfs_size': _number(0, 131072, 'GiB (0: pct default)'),
    'proxmox_container_ssh_public_keys': _each(_pattern(SSH_KEY_RE, 'an OpenSSH public key line')),
    'proxmox_container_hostname': _pattern(HOSTNAME_RE, 'a DNS name'),
    'proxmox_container_net': Rule(_net, 'netN keys to property strings or dicts'),
    'proxmox_container_cores': _number(1, 8192, 'cores'),
    'proxmox_container_memory': _number(16, 268435456, 'MiB'),
    'proxmox_container_swap': _number(0, 268435456, 'MiB'),
    'proxmox_container_features': Rule(_features, 'features to booleans'),
    'proxmox_container_shm_size': _pattern(SHM_SIZE_RE, 'a tmpfs size: a number with k, m, g, t or % (64G, 64T, 50%)'),
    'proxmox_container_gpus': Rule(_gpus, "'all' or a list of GPU indexes from 0 to 63"),
    'proxmox_container_extra_devices': _each(_pattern(DEVICE, 'a /dev path with optional ,gid= ,uid= ,mode=')),
    'proxmox_container_raw_lxc': _each(_pattern(RAW_LXC, 'an lxc.<key>: <value> line')),
    'proxmox_container_shutdown_timeout': _number(1, 86400, 'seconds'),
    'proxmox_container_wait_timeout': _number(1, 86400, 'seconds'),
    # gpu_check
    'gpu_check_nvidia_smi_path': _path(empty=True),
    'gpu_check_driver_version': _pattern(DRIVER_VERSION, 'a driver version such as 580.159.04', empty=True),
    'gpu_check_driver_version_min': _pattern(DRIVER_VERSION, 'a driver version such as 580', empty=True),
    'gpu_check_gpu_count': _number(0, 64, 'GPUs (0: any)'),
    'gpu_check_memory_used_max_mib': _number(0, 1048576, 'MiB'),
    'gpu_check_hypervisor': _pattern(NODE_NAME, 'an inventory host name', empty=True),
    'gpu_check_reclaim_signal_timeout': _number(1, 3600, 'seconds'),
    'gpu_check_reclaim_kill_timeout': _number(1, 3600, 'seconds'),
    'gpu_check_reclaim_wait_timeout': _number(1, 86400, 'seconds'),
    # ml_env
    'ml_env_path': _path(),
    'ml_env_python': _path(what='an absolute path'),
    'ml_env_packages': _each(_pattern(REQUIREMENT, 'a requirement spec such as sglang==0.5.23 (not a pip option)')),
    'ml_env_wheelhouse': _path(empty=True),
    'ml_env_editable': _each(_path()),
    'ml_env_import_checks': _each(_pattern(DOTTED_NAME, 'a dotted module name')),
    # sglang_patch
    'sglang_patch_python': _path(empty=True, what='an absolute path'),
    # sglang_server
    'sglang_server_unit': _pattern(UNIT_NAME, 'a unit name: letters, digits and :_.@-'),
    'sglang_server_python': _path(what='an absolute path'),
    'sglang_server_module': _pattern(DOTTED_NAME, 'a dotted module name'),
    'sglang_server_model_path': _path(empty=True),   # required: cross_host_errors says so once
    'sglang_server_host': _pattern(HOST, 'an address or host name'),
    'sglang_server_port': _number(1, 65535),
    'sglang_server_tp_size': Rule(_tp_size, 'an integer from 1 to 256'),
    'sglang_server_flags': Rule(_flags, 'SGLang flags'),
    'sglang_server_extra_args': Rule(_server_config(parse_extra_args), 'SGLang arguments'),
    'sglang_server_dump_dir': _path(),
    'sglang_server_shm_min_free_gib': _number(0, 1048576, 'GiB'),
    'sglang_server_stale_shm_patterns': _each(_pattern(SHM_PATTERN, 'a segment name prefix with an optional * at '
                                                                    'the end (nccl-*)')),
    'sglang_server_env': Rule(_server_config(_env_over_defaults), 'NAME: value (null drops a default)'),
    'sglang_server_api_key': Rule(_api_key, 'a string on one line'),
    'sglang_server_config_file': _path(suffixes=('.yaml', '.yml'), what='an absolute .yaml path'),
    'sglang_server_log_file': _path(),
    'sglang_server_stop_timeout': _number(1, 86400, 'seconds'),
    'sglang_server_restart_sec': _number(0, 86400, 'seconds'),
    'sglang_server_start_limit_burst': _number(1, 1000),
    'sglang_server_start_limit_interval': _number(0, 604800, 'seconds'),
    'sglang_server_limit_nofile': _number(1024, 1073741816),
    'sglang_server_hypervisor': _pattern(NODE_NAME, 'an inventory host name', empty=True),
    'sglang_server_vmid': _vmid(allow_zero=True),
    'sglang_server_ready_timeout': _number(1, 172800, 'seconds'),
    # a server over several containers (plugin_utils/server_layout.py checks them across hosts)
    'sglang_server_name': _pattern(SERVER_NAME, 'a server name: letters, digits and _.- (up to 63)', empty=True),
    'sglang_server_node_rank': _number(0, 1023),
    'sglang_server_dist_init_port': _number(1, 65535),
    'sglang_server_dist_init_host': _pattern(HOST, 'an address or host name the other nodes reach', empty=True),
    'sglang_server_socket_ifname': _pattern(IFNAMES, 'network interface names as NCCL_SOCKET_IFNAME takes them '
                                                     '(eth0, eth0,eth1, =eth0, ^docker,lo)', empty=True),
    # extraction_job
    'extraction_job_name': _pattern(JOB_NAME, 'letters, digits, _ and . (up to 64, not starting with .; no -: '
                                              'a rid is <name>-<sample id>)'),
    'extraction_job_shard_count': Rule(_shard_count, 'an integer from 1 to %d' % SHARDS_MAX),
    'extraction_job_shard_indexes': Rule(_shard_indexes, 'a non-empty list of distinct shard indexes (integers from 0)'),
    'extraction_job_server_url': _pattern(URL, 'an http:// or https:// URL'),
    'extraction_job_output_root': _path(),
    'extraction_job_dump_dir': _path(),
    'extraction_job_python': _path(what='an absolute path'),
    'extraction_job_install_dir': _path(),
    'extraction_job_config_dir': _path(),
    'extraction_job_data_dir': _path(),
    'extraction_job_log_dir': _path(),
    'extraction_job_unit': _pattern(TEMPLATE_UNIT_NAME, 'a template unit\'s name without @.service: letters, '
                                                        'digits and :_.-'),
    'extraction_job_systemd_dir': _path(),
    'extraction_job_server_unit': _pattern(UNIT_NAME, 'a unit name: letters, digits and :_.@-'),
    'extraction_job_hidden_size': _number(0, 1048576),
    'extraction_job_captured_layers': _number(1, 64),
    'extraction_job_max_length': _number(0, 16777216, 'tokens (0: the model\'s)'),
    'extraction_job_concurrency': _number(1, 4096),
    'extraction_job_request_timeout': _number(1, 86400, 'seconds'),
    'extraction_job_max_attempts': _number(1, 1000),
    'extraction_job_ack_timeout': _number(1, 86400, 'seconds'),
    'extraction_job_drain_workers': _number(1, 256),
    'extraction_job_shm_high': _number(0.01, 0.99),
    'extraction_job_shm_low': _number(0.0, 0.99),
    'extraction_job_output_free_floor_gib': _number(0, 1048576, 'GiB'),
    'extraction_job_output_free_resume_gib': _number(0, 1048576, 'GiB'),
    # the job refuses to start unless the disk holds the rest of the shard times (1 + margin): a fraction
    'extraction_job_space_margin': _number(0, 1, '(a fraction: 0.1 is 10%)'),
    'extraction_job_restart_sec': _number(0, 86400, 'seconds'),
}


# The chat template's markers, system prompt and ignored text, as SpecForge's templates have
# them: many end in a newline (Qwen's "<|im_start|>assistant\n", Llama 3's "\n\n") and Llama
# 3's system prompt holds blank lines. They go only into the job's JSON config (to_nice_json
# escapes them), never into a unit file or a command line.
TEMPLATE_TEXT = frozenset([
    'extraction_job_chat_assistant_header', 'extraction_job_chat_end_of_turn',
    'extraction_job_chat_system_prompt', 'extraction_job_chat_ignore_tokens',
])
TEMPLATE_TEXT_CHARACTERS = '\n\t'


def _at_most(low_name, high_name, what):
    def check(values):
        low, high = values[low_name], values[high_name]
        if low > high:
            return '%s=%s is above %s=%s; %s' % (low_name, show(low), high_name, show(high), what)
        return None
    return CrossRule((low_name, high_name), check)


def _shards_in_count(values):
    count = _as_int(values['extraction_job_shard_count'])
    over = [item for item in values['extraction_job_shard_indexes'] if _as_int(item) >= count]
    if over:
        shown = (show(values['extraction_job_shard_indexes']), ', '.join(show(item) for item in over),
                 show(values['extraction_job_shard_count']))
        return ('extraction_job_shard_indexes=%s holds %s, not below extraction_job_shard_count=%s; a shard index '
                'is from 0 to the count - 1' % shown)
    return None


def _wheelhouse_for_src(values):
    if values['ml_env_wheelhouse_src'] and not values['ml_env_wheelhouse']:
        return ('ml_env_wheelhouse_src=%s is set and ml_env_wheelhouse is empty; give ml_env_wheelhouse, the '
                'directory on the host it is copied to' % show(values['ml_env_wheelhouse_src']))
    return None


def _dataset_on_the_controller(values):
    """The dataset is copied from the controller (where both checks run) unless it is on the host."""
    dataset, on_host = values['extraction_job_dataset'], values['extraction_job_dataset_on_host']
    if dataset == '' or boolean(on_host, strict=False):
        return None
    if not os.path.isfile(dataset):
        return ('extraction_job_dataset=%s is not a file on the controller; give the path of the JSON Lines dataset '
                '(or set extraction_job_dataset_on_host when it is on the host)' % show(dataset))
    return None


class CrossRule:
    """A rule between variables of one role: fn({name: value}) -> a whole message or None."""

    def __init__(self, names, check):
        self.names = names
        self.check = check


# the rules between variables, checked when each of their variables passed its own rule; a variable not
# given counts with its default (when that is not a template)
CROSS_RULES = (
    _at_most('extraction_job_shm_low', 'extraction_job_shm_high',
             'the job sends again under the low watermark and stops above the high one'),
    _at_most('extraction_job_output_free_floor_gib', 'extraction_job_output_free_resume_gib',
             'the job stops below the floor and sends again above the resume level'),
    CrossRule(('extraction_job_shard_indexes', 'extraction_job_shard_count'), _shards_in_count),
    CrossRule(('ml_env_wheelhouse_src', 'ml_env_wheelhouse'), _wheelhouse_for_src),
    CrossRule(('extraction_job_dataset', 'extraction_job_dataset_on_host'), _dataset_on_the_controller),
)


def _dump_dir_is_the_servers(values):
    job, server = values['extraction_job_dump_dir'], values['sglang_server_dump_dir']
    if job.rstrip('/') != server.rstrip('/'):
        return ('extraction_job_dump_dir=%s is not the server\'s dump dir (sglang_server_dump_dir=%s): the job waits '
                'for dumps the server writes elsewhere, every sample its ack timeout, each attempt; leave '
                'extraction_job_dump_dir unset (it follows the server\'s) or give the same dir' % (show(job), show(server)))
    return None


# the rules between variables of two roles, on one host: inventory_check with a value not set as its role's
# plain default; role_input_check of the first name's role with the other name when the play has it
ACROSS_ROLES = (
    CrossRule(('extraction_job_dump_dir', 'sglang_server_dump_dir'), _dump_dir_is_the_servers),
)
ACROSS_NAMES = frozenset(name for rule in ACROSS_ROLES for name in rule.names[1:])


def across_role_errors(specs, values, defaults=True):
    """ACROSS_ROLES among one host's values ({name: value}); a name not in values counts with its spec's
    default when defaults and that is not a template, else the rule is left out."""
    options = dict((name, option) for role in ROLES for name, option in specs[role].items())
    errors = []
    for rule in ACROSS_ROLES:
        if not set(rule.names) & set(values):
            continue
        found = {}
        for name in rule.names:
            value = values[name] if name in values else options[name].get('default') if defaults else None
            # a value that breaks its own rule is named by it, not compared
            if not isinstance(value, str) or '{{' in value or (name in RULES and RULES[name].check(value)):
                break
            found[name] = value
        else:
            reason = rule.check(found)
            if reason:
                errors.append(reason)
    return errors


# rules whose reason is already a whole message naming the variable (plugin_utils/server_config.py's)
MESSAGE_RULES = frozenset(RULES[name].check for name in (
    'sglang_server_flags', 'sglang_server_extra_args', 'sglang_server_env', 'sglang_server_api_key'))


def load_specs(collection=COLLECTION):
    """{role: options of its main entry point}, from each role's meta/argument_specs.yml (spec_defaults.py reads
    them), each a copy of its own."""
    return dict((role, copy.deepcopy(role_options(role, collection))) for role in ROLES)


def _control_errors(name, value, secret):
    """A message if any string in value (keys too) holds a control character."""
    allowed = TEMPLATE_TEXT_CHARACTERS if name in TEMPLATE_TEXT else ''
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str) and bad_character(_without(item, allowed)) is not None:
            return ['%s=%s holds a control character (%r); give it on one line without them'
                    % (name, '(hidden)' if secret else show(value),
                       bad_character(_without(item, allowed)))]
    return []


def _without(text, characters):
    return ''.join(char for char in text if char not in characters) if characters else text


def role_value_errors(options, values):
    """Messages for the values (given ones only) of one role: types and choices, then RULES."""
    given = dict((k, v) for k, v in values.items() if k in options)
    if not given:
        return []
    errors = []
    for name in sorted(given):
        # Ansible's int conversion fails with OverflowError on inf: refuse it first
        if isinstance(given[name], float) and not math.isfinite(given[name]):
            errors.append('%s=%r is not a finite number' % (name, given[name]))
    given = dict((k, v) for k, v in given.items() if not (isinstance(v, float) and not math.isfinite(v)))
    spec = dict((name, dict((k, v) for k, v in option.items() if k not in ('description', 'default')))
                for name, option in options.items() if name in given)
    texts, converted, failed = _spec_errors(spec, given)
    for text in texts:
        for name in spec:
            if spec[name].get('no_log') and isinstance(given[name], str) and given[name]:
                text = text.replace(given[name], '(hidden)')
        errors.append(text)
    for name in sorted(given):
        secret = bool(spec[name].get('no_log'))
        control = _control_errors(name, given[name], secret)
        if control:
            errors.extend(control)
            failed.add(name)
            continue
        if name in failed or name not in RULES:
            continue
        # the spec's conversion ('8' to 8 for an int, "a,b" to a list); a secret is checked as
        # given (the API key must be a string, not a number turned into one)
        value = given[name] if secret else converted.get(name, given[name])
        reason = RULES[name].check(value)
        if reason:
            if RULES[name].check in MESSAGE_RULES:
                errors.append(reason)
            else:
                shown = '(hidden)' if secret else show(given[name])
                errors.append('%s=%s is %s; give %s' % (name, shown, reason, RULES[name].what))
            failed.add(name)
    errors.extend(cross_errors(options, given, converted, failed))
    return errors


def _spec_errors(spec, given):
    """The argument spec's messages, its conversion and the names that failed it.

    ansible-core's int conversion raises OverflowError on 'inf' or '1e999': then each value is
    validated alone, so that such a value is one named error and every other one is still checked.
    """
    try:
        result = ArgumentSpecValidator(spec).validate(given)
    except (OverflowError, ValueError):
        texts, converted, failed = [], {}, set()
        for name in sorted(spec):
            try:
                alone = ArgumentSpecValidator({name: spec[name]}).validate({name: given[name]})
            except (OverflowError, ValueError):
                texts.append('%s=%s is not a finite number; give %s' % (
                    name, '(hidden)' if spec[name].get('no_log') else show(given[name]),
                    RULES[name].what if name in RULES else 'a value of type %s' % spec[name].get('type', 'str')))
                failed.add(name)
                continue
            found = [str(error) for error in alone.errors]
            texts.extend(found)
            converted.update(alone.validated_parameters)
            if found:
                failed.add(name)
        return texts, converted, failed
    failed = set(name for name in spec if any(name in str(e) for e in result.errors))
    return [str(error) for error in result.errors], result.validated_parameters, failed


def cross_errors(options, given, converted, failed=()):
    """CROSS_RULES among one role's values: a given one as converted, else its default when that is plain."""
    errors = []
    for rule in CROSS_RULES:
        if not set(rule.names) <= set(options) or not set(rule.names) & set(given) or set(rule.names) & set(failed):
            continue
        values = {}
        for name in rule.names:
            value = converted.get(name, given[name]) if name in given else options[name].get('default')
            if value is None or (isinstance(value, str) and '{{' in value):
                break
            values[name] = value
        else:
            reason = rule.check(values)
            if reason:
                errors.append(reason)
    return errors


# the variables a container must set (no default serves): {name: what to give}
REQUIRED = {
    'sglang_server_model_path': 'the absolute path of the model dir',
}


def required_errors(values, names=None):
    """A message for each REQUIRED variable (of names, default all) that values lacks or holds empty."""
    return ['%s is not set; give %s' % (name, REQUIRED[name]) for name in sorted(REQUIRED)
            if (names is None or name in names) and values.get(name) in (None, '')]


def host_value_errors(specs, values):
    """Messages for every role's variables among one host's values."""
    errors = []
    for role in ROLES:
        errors.extend(role_value_errors(specs[role], values))
    errors.extend(across_role_errors(specs, values))
    return errors


def _as_int(value):
    return inventory_int(value, 12)


def inventory_host_errors(host, values, inventory):
    """gpu_check_hypervisor, when given, names a host of the ``inventory`` (its host names): the role reads
    the hypervisor's kernel module there. One rule for inventory_check and gpu_check's own first check."""
    node = values.get('gpu_check_hypervisor')
    if not isinstance(node, str) or not node or node in inventory:
        return []
    return ["%s: gpu_check_hypervisor=%s is not a host of the inventory; give the inventory name of its Proxmox "
            "hypervisor, or '' to skip the comparison" % (host, show(node))]


def cross_host_errors(hosts, hypervisors):
    """The rules across an inventory's hosts: {host: {variable: value}} -> messages.

    Every container names a proxmox_hypervisors host and a vmid, two on one node never share
    a vmid (compared as integers: 471, "471" and "0471" are one container), the model path
    is set, and tp-size divides the GPU count when both are known (on a one-node server; a
    multi-node server's tp-size is its nodes' GPUs together: server_layout.layout_errors).
    """
    errors = []
    placed = {}
    multinode = set(host for nodes in servers(hosts).values() if len(nodes) > 1 for host in nodes)
    for host in sorted(hosts):
        values = hosts[host]
        node = values.get('proxmox_container_node')
        if node in (None, ''):
            errors.append('%s: proxmox_container_node is not set; give the inventory name of its hypervisor (%s)'
                          % (host, ', '.join(hypervisors) or 'the proxmox_hypervisors group is empty'))
        elif node not in hypervisors:
            errors.append('%s: proxmox_container_node=%s is not a host of the proxmox_hypervisors group (%s)'
                          % (host, show(node), ', '.join(hypervisors) or 'empty'))
        vmid = _as_int(values.get('proxmox_container_vmid'))
        if 'proxmox_container_vmid' not in values:
            errors.append('%s: proxmox_container_vmid is not set; give its container id on %s' % (host, node))
        elif vmid is not None and isinstance(node, str) and node:
            placed.setdefault((node, vmid), []).append(host)
        errors.extend('%s: %s' % (host, error) for error in required_errors(values))
        tp_size = _as_int(values.get('sglang_server_tp_size'))
        gpus = _as_int(values.get('gpu_check_gpu_count'))
        if tp_size and gpus and gpus % tp_size and host not in multinode:
            errors.append('%s: sglang_server_tp_size=%d does not divide gpu_check_gpu_count=%d' % (host, tp_size, gpus))
    for (node, vmid), same in sorted(placed.items()):
        if len(same) > 1:
            errors.append('%s are all container %d on %s (proxmox_container_vmid %s); a container is one host, '
                          'the node of one server'
                          % (' and '.join(same), vmid, node,
                             ', '.join(show(hosts[h]['proxmox_container_vmid']) for h in same)))
    return errors


def _serial_error(value):
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, int):
        return None if value >= 1 else 'less than 1'
    if isinstance(value, str):
        if re.fullmatch(r'[1-9][0-9]{0,5}', value):
            return None
        match = re.fullmatch(r'([0-9]{1,3})%', value)
        if match:
            return None if 1 <= int(match.group(1)) <= 100 else 'a percentage out of 1% to 100%'
    return 'neither a number of hosts nor a percentage'


def rollout_errors(serial, max_fail_percentage, reclaim, force):
    """extract.yml's own variables: extract_serial, extract_max_fail_percentage, extract_reclaim, extract_force."""
    errors = []
    items = serial if isinstance(serial, (list, tuple)) else [serial]
    if isinstance(serial, (list, tuple)) and not serial:
        errors.append('extract_serial=[] is empty; give a number of hosts, a percentage (50%) or a list of them')
    for item in items:
        reason = _serial_error(item)
        if reason:
            errors.append('extract_serial=%s: %s is %s; give a number of hosts (1 or more), a percentage from 1%% to '
                          '100%% or a list of them ([1, "100%%"])' % (show(serial), show(item), reason))
            break
    value = _as_int(max_fail_percentage)
    if value is None or not 0 <= value <= 100:
        errors.append('extract_max_fail_percentage=%s is not an integer from 0 to 100' % show(max_fail_percentage))
    for name, flag in (('extract_reclaim', reclaim), ('extract_force', force)):
        if not isinstance(flag, bool) and str(flag).lower() not in ('true', 'false', 'yes', 'no', '1', '0'):
            errors.append('%s=%s is not a boolean' % (name, show(flag)))
    return errors
