# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each role variable may hold, checked on the controller before any host is touched.

Each variable's record (plugin_utils/role_variables/<role>.py) gives its type and choices (the
role's meta/argument_specs.yml is made from it, and Ansible's ArgumentSpecValidator enforces them,
here and when the role starts) and what that format cannot say - a range, a whole-value pattern, a
path that must not be a system directory - its rule (RULES, gathered from the records); the rules
between variables of a role (a low watermark at most the high one, a shard index below the count)
are CROSS_RULES, and the variables a container must set REQUIRED. This is the one place of these
rules: inventory_check (every host of an inventory),
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

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_int, show
from ansible_collections.eagle3.extraction.plugins.plugin_utils import variables
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_config import bad_character
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_layout import servers

ROLES = variables.ROLES
# each variable's rule beyond its type, from its record
RULES = dict((name, variable.rule) for name, variable in variables.BY_NAME.items() if variable.rule)


# The chat template's markers, system prompt and ignored text, as SpecForge's templates have
# them: many end in a newline (Qwen's "<|im_start|>assistant\n", Llama 3's "\n\n") and Llama
# 3's system prompt holds blank lines. They go only into the job's JSON config (to_nice_json
# escapes them), never into a unit file or a command line.
TEMPLATE_TEXT = frozenset(name for name, variable in variables.BY_NAME.items() if variable.template_text)
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


def _wheelhouse_for_src(prefix):
    source, target = prefix + '_wheelhouse_src', prefix + '_wheelhouse'

    def check(values):
        if values[source] and not values[target]:
            return ('%s=%s is set and %s is empty; give %s, the directory on the host it is copied to'
                    % (source, show(values[source]), target, target))
        return None
    return CrossRule((source, target), check)


def _different_ports(names, what):
    """No two of the named ports are the same number."""
    def check(values):
        seen = {}
        for name in names:
            port = _as_int(values[name])
            if port in seen:
                return ('%s=%s is the same port as %s=%s; %s each listen on a port of its own: give them '
                        'different ports' % (name, show(values[name]), seen[port], show(values[seen[port]]), what))
            seen[port] = name
        return None
    return CrossRule(names, check)


def _dataset_on_the_controller(values):
    """The dataset is copied from the controller (where both checks run) unless it is on the host; the online mode
    reads none (SpecForge's producer owns the dataset), so a dataset left in the inventory is not looked at."""
    dataset, on_host = values['extraction_job_dataset'], values['extraction_job_dataset_on_host']
    if dataset == '' or boolean(on_host, strict=False) or values['extraction_job_mode'] == 'online':
        return None
    if not os.path.isfile(dataset):
        return ('extraction_job_dataset=%s is not a file on the controller; give the path of the JSON Lines dataset '
                '(or set extraction_job_dataset_on_host when it is on the host)' % show(dataset))
    return None


def _output_outside(dump_name):
    """The output root is not the dump dir nor inside it: the dump dir is a tmpfs (lost on reboot, counted against the
    job's watermark), and the server's reclaim moves it aside with everything in it."""
    def check(values):
        root, dump = values['extraction_job_output_root'], values[dump_name]
        if (root.rstrip('/') + '/').startswith(dump.rstrip('/') + '/'):
            return ('extraction_job_output_root=%s is inside %s=%s, the dumps\' tmpfs: the output would be lost on '
                    'reboot, count against the watermark and be moved aside with the dumps by the server\'s reclaim; '
                    'give a dir on durable storage' % (show(root), dump_name, show(dump)))
        return None
    return CrossRule(('extraction_job_output_root', dump_name), check)


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
    _wheelhouse_for_src('ml_env'),
    _wheelhouse_for_src('mooncake_master'),
    _different_ports(('mooncake_master_rpc_port', 'mooncake_master_metadata_port', 'mooncake_master_metrics_port',
                      'mooncake_master_segment_port'),
                     "the master's RPC, metadata and metrics servers and the segment holder"),
    CrossRule(('extraction_job_dataset', 'extraction_job_dataset_on_host', 'extraction_job_mode'),
              _dataset_on_the_controller),
    _output_outside('extraction_job_dump_dir'),
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
    _output_outside('sglang_server_dump_dir'),
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


def load_specs():
    """{role: options of its main entry point}, from each role's variable records, each a copy of its own."""
    return dict((role, copy.deepcopy(variables.options(role))) for role in ROLES)


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
        error = variables.rule_error(name, value, given[name])
        if error:
            errors.append(error)
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
REQUIRED = dict((name, variable.needed) for name, variable in variables.BY_NAME.items() if variable.needed)


# what an extraction server must set: a trainer's (online_training) are checked by its own role's check
SERVER_REQUIRED = [name for name in REQUIRED if variables.role_of(name) != 'online_training']


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
        errors.extend('%s: %s' % (host, error) for error in required_errors(values, SERVER_REQUIRED))
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
