# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_server's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_config import (
    ServerConfigError, check_api_key, checked_flags, environment_lines, parse_extra_args)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import (
    DOTTED_NAME, HOST, HOST_NAME, NODE_NAME, UNIT_NAME, Rule, each, fraction, ip, loopback, number, path, pattern,
    secret_string, unit_name, vmid)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'sglang_server'

SERVER_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,62}')
# a stale-segment glob names a prefix: letters first, at most one * and only at the end
SHM_PATTERN = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{1,99}\*?')
# NCCL_SOCKET_IFNAME's forms: eth0, eth0,eth1, =eth0 (exact), ^docker,lo (excluded prefixes)
# each name starts with a letter, digit or _ (NCCL took -eth0 for an interface of that name: none)
IFNAMES = re.compile(r'[=^]?[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}(,[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14})*')


def _dist_init_host(value):
    """Rank 0 as the other nodes reach it: an address or a host name (not an option: --help), never a loopback
    one (127.0.0.2, localhost.localdomain: each node would call itself, and the server never forms)."""
    if value == '':
        return None
    if not isinstance(value, str) or not (ip(value) or HOST_NAME.fullmatch(value)):
        return 'not an address or host name'
    if loopback(value) or value.lower().split('.')[0] in ('localhost', 'ip6-localhost', 'ip6-loopback'):
        return 'a loopback address, which each node reaches itself at'
    return None


def _tp_size(value):
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, str) and re.fullmatch(r'[0-9]{1,3}', value):
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= 256:
        return 'not an integer from 1 to 256'
    return None


def _owned():
    """{SGLang flag: the variable that alone sets it}, from the records below."""
    return dict((variable.flag, variable.name) for variable in VARIABLES if variable.flag)


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


def _flags(value):
    """sglang_server_flags: the config file's rules (no flag that has a variable of its own), then the value of
    a flag the role reads itself."""
    reason = _server_config(lambda flags: checked_flags(flags, _owned()))(value)
    if reason:
        return reason
    share = value.get('mem-fraction-static')
    if share not in (None, '') and not 0 < (fraction(share) or 0) < 1:
        return ("sglang_server_flags['mem-fraction-static']=%s is not a number strictly between 0 and 1 (the share "
                "of each GPU's memory for weights and KV cache)" % show(share))
    return None


DEFAULTS_HEADER = ()

ENTRY_POINTS = (
    EntryPoint(
        'main', 'Run the SGLang server as a systemd unit and wait until it is healthy',
        description=[
            (
                'Writes C(/etc/systemd/system/<sglang_server_unit>.service), validated with C(systemd-analyze '
                'verify), whose C(ExecStart) runs O(sglang_server_python) C(-m) O(sglang_server_module) '
                'C(--config) O(sglang_server_config_file), and whose sorted C(Environment=) lines come from '
                'O(sglang_server_env) merged over the defaults.'),
            (
                'C(KillMode=control-group) stops the whole process tree with the unit; C(SGL_FORCE_SHUTDOWN=1) '
                'makes the launcher stop without waiting for requests.'),
            (
                'The flags and the API key go to the root-only O(sglang_server_config_file), never onto the '
                "command line, into the unit, a diff or a message; the server's log, where SGLang prints its "
                'settings, is root-only too.'),
            (
                'Preflight fails, naming the variable, on a bad port, tp-size or memory fraction, a model dir '
                'without C(config.json) or a shard of C(model.safetensors.index.json), or a dump dir not on a big '
                'enough tmpfs; when the unit is not running it frees the port and kills leftover server processes.'),
            (
                'Starts or restarts the unit only on change, then waits for C(/health) to answer 200, failing at '
                'once with the last 50 log lines and the recognised cause if the unit dies.'),
        ]),
    EntryPoint(
        'preflight', 'Only the checks (variables, GPUs, model dir, dump dir); reads, changes nothing'),
    EntryPoint(
        'reclaim', 'Free what a server that is not running left behind',
        description=[
            (
                'The port, leftover processes (from the hypervisor when they are out of reach), stale '
                'shared-memory segments nobody holds, and undrained dumps moved aside (or a stop); extract.yml '
                'runs it only where the unit is not running.'),
        ]),
    EntryPoint(
        'deploy', 'Install, configure and run the unit, then wait until it is healthy'),
)

VARIABLES = (
    Variable(
        'sglang_server_unit', 'str', 'sglang-extraction',
        description='Name of the systemd unit, without C(.service).',
        rule=unit_name(UNIT_NAME, 'a unit name without .service: letters, digits and :_.@-'), plan=True,
        same_on_every_node=True,
        comment="The systemd unit's name (without .service)."),
    Variable(
        'sglang_server_python', 'str', "{{ lookup('eagle3.extraction.ml_env_python') }}",
        description=(
            "The venv's interpreter; ml_env's fact C(ml_env_python_bin) when that role ran, else that role's "
            "default venv's (lookup C(eagle3.extraction.ml_env_python))."),
        rule=path(what='an absolute path'),
        comment=(
            "The venv's interpreter: ml_env's fact when that role ran, else its default venv's (lookup ml_env_python).")),
    Variable(
        'sglang_server_module', 'str', 'sglang.launch_server',
        description='The module run with C(python -m).',
        rule=pattern(DOTTED_NAME, 'a dotted module name'), plan=True, same_on_every_node=True,
        comment='The module run with `python -m`.'),
    Variable(
        'sglang_server_model_path', 'str', '',
        description=(
            'Absolute path of the model dir (C(--model-path), set here alone); it needs C(config.json) and every '
            'shard of C(model.safetensors.index.json). Required.'),
        rule=path(empty=True), flag='model-path', same_on_every_node=True, needed='the absolute path of the model dir',
        comment=(
            'The four flags every server has, set here alone (sglang_server_flags and sglang_server_extra_args\n'
            'refuse them); more in sglang_server_flags.'), group=True),
    Variable(
        'sglang_server_host', 'str', '127.0.0.1',
        description=[
            (
                'C(--host), set here alone (O(sglang_server_flags) and O(sglang_server_extra_args) refuse it). '
                'Beyond localhost without O(sglang_server_api_key) the role warns.'),
            (
                'An IPv4 or IPv6 address (without brackets), a host name, V(0.0.0.0), V(::) or empty; clients on '
                'the host call C(127.0.0.1) for V(0.0.0.0) and empty, C([::1]) for V(::), which SGLang binds '
                "IPv6-only (the host's plan's C(server.address), the lookup C(eagle3.extraction.host_plan))."),
        ],
        rule=pattern(HOST, 'an address or host name'), flag='host', peer=True),
    Variable(
        'sglang_server_port', 'int', 8000,
        description=(
            'C(--port), 1 to 65535, set here alone (O(sglang_server_flags) and O(sglang_server_extra_args) '
            'refuse it); the job, the table, stop and the cache call the server on it.'),
        rule=number(1, 65535), flag='port', peer=True, same_on_every_node=True),
    Variable(
        'sglang_server_tp_size', 'raw',
        '{{ gpu_check_gpus | length if gpu_check_gpus is defined else gpu_check_gpu_count | default(8) }}',
        description=[
            (
                'C(--tp-size), 1 to 256, set here alone; it must divide the visible GPU count. Default the GPUs '
                'gpu_check saw.'),
            "On a multi-node server (O(sglang_server_name)) the sum of its nodes' GPUs, set on every node.",
        ],
        rule=Rule(_tp_size, 'an integer from 1 to 256'), flag='tp-size', same_on_every_node=True,
        comment='Tensor parallel size: every GPU gpu_check saw, else gpu_check_gpu_count, else 8.'),
    Variable(
        'sglang_server_flags', 'dict', {
            'mem-fraction-static': 0.88,
            'disable-prefill-cuda-graph': True,
            'disable-decode-cuda-graph': True,
            'disable-radix-cache': True,
            'disable-custom-all-reduce': True,
        },
        description=[
            (
                'More flags, C(--key) for each key (without C(--)), written to O(sglang_server_config_file); a '
                'value gives C(--key value), V(true) C(--key), V(false), null or an empty list nothing, a list '
                'C(--key item1 item2), a dict its JSON.'),
            (
                'A flag that has a variable of its own (C(model-path), C(host), C(port), C(tp-size)) is refused, '
                'naming the variable that sets it. C(api-key), C(admin-api-key) and C(config) are refused (the key '
                'has O(sglang_server_api_key)); so is a newline or other control character in a key or value.'),
            'The default is the extraction flags the manual setup ran with.',
        ],
        rule=Rule(_flags, 'SGLang flags', whole_message=True), plan=True, same_on_every_node=True,
        comment=(
            'More flags, one `--key` a key (written to the config file): a value gives `--key value`,\n'
            'true `--key`, false, null or [] nothing, a list `--key item1 item2`. None of the four\n'
            'above. Defaults: the extraction flags the manual setup ran with.\n'
            'disable-prefill-cuda-graph and disable-decode-cuda-graph together are --disable-cuda-graph, which\n'
            '--config refuses.'), group=True),
    Variable(
        'sglang_server_extra_args', 'list', [],
        description=[
            (
                'Arguments as typed on a command line (C(--flag), C(--key value), C(--key=value)), merged into the '
                'config file after O(sglang_server_flags) (they win).'),
            (
                'A flag that has a variable of its own (C(--model-path), C(--host), C(--port), C(--tp-size)) is '
                'refused, naming the variable that sets it, as are the flags O(sglang_server_flags) refuses.'),
        ],
        elements='str',
        rule=Rule(_server_config(lambda args: parse_extra_args(args, _owned())), 'SGLang arguments',
                  whole_message=True),
        same_on_every_node=True,
        comment=(
            'Arguments as typed on a command line (`--flag`, `--key value`), merged after the flags (none of the '
            'four).')),
    Variable(
        'sglang_server_enable_metrics', 'bool', True,
        description=(
            "C(--enable-metrics): SGLang serves its own Prometheus metrics (requests running and queued, tokens, "
            "latencies) at C(/metrics) on the server's port. The host plan adds the flag while this is on; a value "
            'of C(enable-metrics) in O(sglang_server_flags) or O(sglang_server_extra_args) stands over it. On by '
            "default: on one H100 it cost nothing measurable (docs/benchmarks.md, \"The server flags the roles "
            'add").'),
        plan=True,
        comment="SGLang's own Prometheus metrics at /metrics on the server's port (--enable-metrics); no measurable cost."),
    Variable(
        'sglang_server_dump_dir', 'str', '/dev/shm/sglang_hs',
        description=(
            'C(SGLANG_HS_DUMP_DIR), an absolute path that is not a system directory; on a tmpfs with at least '
            'O(sglang_server_shm_min_free_gib) GiB free.'),
        rule=path(), plan=True,
        comment=(
            'Where the capture hook writes (SGLANG_HS_DUMP_DIR); must be on a tmpfs with at least\n'
            'sglang_server_shm_min_free_gib GiB free.'), group=True),
    Variable(
        'sglang_server_shm_min_free_gib', 'float', 8,
        description="GiB that must be free on the dump dir's tmpfs, 0 or more.",
        rule=number(0, 1048576, 'GiB')),
    Variable(
        'sglang_server_undrained_dumps', 'str', 'move',
        description=[
            (
                'What to do with dumps (C(*.pt) files) found in O(sglang_server_dump_dir) before a start (the last '
                "run's undrained output; the capture's own files are no dumps). V(move) renames the dir to C(<dump "
                'dir>.undrained-<UTC time>) on the same filesystem; V(stop) fails with their count and size. They '
                'are never deleted.'),
        ],
        choices=['move', 'stop'],
        comment=(
            "Dumps (*.pt) found in the dump dir before a start are the last run's undrained output:\n"
            '"move" renames the dir to <dump dir>.undrained-<UTC time> (same filesystem, nothing\n'
            'copied); "stop" fails the play with their count and size. Never deleted.')),
    Variable(
        'sglang_server_stale_shm_patterns', 'list', ['nccl-*', 'psm_*'],
        description=(
            'Globs of stale shared-memory segments in C(/dev/shm) removed before a start when no process holds '
            'them; each a name prefix with at most a trailing C(*).'),
        elements='str',
        rule=each(pattern(SHM_PATTERN, 'a segment name prefix with an optional * at the end (nccl-*)')),
        comment='Stale shared-memory segments in /dev/shm removed before a start when no process holds them.'),
    Variable(
        'sglang_server_interconnect', 'str', "{{ gpu_check_interconnect | default('nvlink') }}",
        description=(
            'V(pcie) adds the six C(NCCL_*) variables the manual setup ran with on PCIe to the environment; '
            'V(nvlink) none.'),
        choices=['nvlink', 'pcie'], plan=True,
        comment="The GPUs' interconnect: the NCCL variables of the manual setup (PCIe) are set on pcie only."),
    Variable(
        'sglang_server_env', 'dict', {},
        description=[
            (
                'C(Environment=) variables merged over the defaults (C(SGLANG_HS_DUMP_DIR), '
                'C(SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1), C(SGL_FORCE_SHUTDOWN=1), the NCCL ones on PCIe); '
                'this dict wins, a null value drops a default. Rendered sorted by name.'),
        ],
        rule=Rule(_server_config(_env_over_defaults), 'NAME: value (null drops a default)', whole_message=True),
        plan=True, peer=True,
        comment="Environment= lines, merged over the role's defaults (this dict wins; null drops a default)."),
    Variable(
        'sglang_server_api_key', 'str', '',
        description=[
            (
                'C(--api-key), meant for Ansible Vault; written to O(sglang_server_config_file) (mode 0600) only. '
                'Empty runs without a key. A string; a newline, a control character or a space at either end is '
                'refused.'),
        ],
        no_log=True,
        rule=secret_string('sglang_server_api_key', _server_config(check_api_key)), same_on_every_node=True,
        comment='The API key (keep it in Ansible Vault); empty runs the server without a key.', group=True),
    Variable(
        'sglang_server_config_file', 'str', '/etc/sglang/{{ sglang_server_unit }}.yaml',
        description=[
            (
                'The root-only (0600) YAML file that holds every flag and the API key; the unit runs C(python -m '
                '<module> --config <this file>), so no flag value or key is on a command line. An absolute path; '
                'SGLang reads only names ending in C(.yaml) or C(.yml).'),
        ],
        rule=path(suffixes=('.yaml', '.yml'), what='an absolute .yaml path'),
        comment='Every flag and the API key, root-only (0600): the unit runs `python -m <module> --config <this>`.'),
    Variable(
        'sglang_server_log_file', 'str', '/var/log/sglang/{{ sglang_server_unit }}.log',
        description=(
            "File the server's stdout and stderr are appended to; root-only (0600), as SGLang logs its key there. "
            'An absolute path that is not a system directory.'),
        rule=path(),
        comment="The server's stdout and stderr are appended here (root-only: SGLang logs its key).", group=True),
    Variable(
        'sglang_server_stop_timeout', 'int', 120,
        description='C(TimeoutStopSec), seconds from SIGTERM to SIGKILL of the whole tree, at least 1.',
        rule=number(1, 86400, 'seconds'),
        comment='Seconds systemd waits after SIGTERM before SIGKILL to the whole cgroup.'),
    Variable(
        'sglang_server_restart_sec', 'int', 30,
        description='C(RestartSec) of C(Restart=on-failure), seconds, 0 or more.',
        rule=number(0, 86400, 'seconds'),
        comment=(
            'Restart=on-failure, at most sglang_server_start_limit_burst starts in\n'
            'sglang_server_start_limit_interval seconds.')),
    Variable(
        'sglang_server_start_limit_burst', 'int', 3,
        description='C(StartLimitBurst).',
        rule=number(1, 1000)),
    Variable(
        'sglang_server_start_limit_interval', 'int', 1800,
        description='C(StartLimitIntervalSec), seconds.',
        rule=number(0, 604800, 'seconds')),
    Variable(
        'sglang_server_limit_nofile', 'int', 1048576,
        description='C(LimitNOFILE).',
        rule=number(1024, 1073741816)),
    Variable(
        'sglang_server_hypervisor', 'str', "{{ proxmox_container_node | default('') }}",
        description=[
            (
                'Inventory name of the Proxmox node that runs this container. When the port or a leftover process '
                'is out of reach inside the container, the reclamation is repeated there with '
                'O(sglang_server_vmid). Empty disables that.'),
        ],
        rule=pattern(NODE_NAME, 'an inventory host name', empty=True),
        comment=(
            'Where leftovers out of reach inside the container are reclaimed from (pct, vmid):\n'
            "the Proxmox node's inventory name and the container's ID; empty or 0: no escalation."), group=True),
    Variable(
        'sglang_server_vmid', 'int', '{{ proxmox_container_vmid | default(0) }}',
        description=[
            (
                "The container's Proxmox ID (100 to 999999999), for the escalation to O(sglang_server_hypervisor); "
                'V(0) disables it.'),
        ],
        rule=vmid(allow_zero=True)),
    Variable(
        'sglang_server_ready_timeout', 'int', 3600,
        description='Seconds to wait for C(/health) to answer 200 after a start, at least 1.',
        rule=number(1, 172800, 'seconds'),
        comment='Seconds to wait for /health to answer 200 after a (re)start (big models take up to an hour).',
        group=True),
    Variable(
        'sglang_server_name', 'str', '',
        description=[
            (
                'The server this container is a node of (multi-node tensor parallelism). The hosts with the same '
                'name are its nodes; each runs C(--nnodes N --node-rank) O(sglang_server_node_rank) '
                "C(--dist-init-addr) with rank 0's address, and only rank 0 serves HTTP. They must agree on "
                'SGLang, the patch, the model and the flags, and O(sglang_server_tp_size) is the sum of their GPUs '
                '(inventory_check refuses otherwise).'),
            'Empty (the default) makes this container a one-node server of its own. Letters, digits and C(_.-).',
        ],
        rule=pattern(SERVER_NAME, 'a server name: letters, digits and _.- (up to 63)', empty=True), peer=True,
        comment=(
            'One server over several containers (multi-node tensor parallelism): the hosts with the same\n'
            'sglang_server_name are its nodes and sglang_server_node_rank their --node-rank (0 to N-1; only\n'
            "rank 0 serves HTTP). Every node gets --nnodes N and --dist-init-addr <rank 0's\n"
            'sglang_server_dist_init_host, default its ansible_host>:<sglang_server_dist_init_port>.\n'
            "sglang_server_tp_size is then the sum of the nodes' GPUs. Empty name: a one-node server."), group=True),
    Variable(
        'sglang_server_node_rank', 'int', 0,
        description='C(--node-rank) of this node in its server, 0 to N-1 once each (0 serves HTTP).',
        rule=number(0, 1023), peer=True),
    Variable(
        'sglang_server_dist_init_port', 'int', 5000,
        description='The port rank 0 listens on for the other nodes (C(--dist-init-addr HOST:PORT)), 1 to 65535.',
        rule=number(1, 65535), peer=True, same_on_every_node=True),
    Variable(
        'sglang_server_dist_init_host', 'str', '',
        description=[
            (
                "Rank 0's address in C(--dist-init-addr), as the other nodes reach it; empty is its "
                'C(ansible_host).'),
            (
                'Required when rank 0 is reached through its hypervisor (C(community.proxmox.proxmox_pct_remote)), '
                "whose C(ansible_host) is the node's; the other nodes then call its HTTP port at this address too."),
        ],
        rule=Rule(_dist_init_host, 'an address or host name the other nodes reach, not a loopback one (or empty)'),
        peer=True, same_on_every_node=True),
    Variable(
        'sglang_server_socket_ifname', 'str', '',
        description=[
            (
                'The network interface the nodes talk over, set as C(NCCL_SOCKET_IFNAME) and C(GLOO_SOCKET_IFNAME) '
                "in this node's unit (V(eth0), or NCCL's forms V(eth0,eth1), V(=eth0), V(^docker,lo)); empty sets "
                'neither. Set per host, since nodes may name different interfaces. More NCCL variables go in this '
                "host's O(sglang_server_env)."),
        ],
        rule=pattern(IFNAMES, 'network interface names as NCCL_SOCKET_IFNAME takes them (eth0, eth0,eth1, =eth0, '
                              '^docker,lo)', empty=True),
        plan=True,
        comment=(
            'The interface the nodes talk over: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME of this node\n'
            "(eth0, or NCCL's forms: eth0,eth1 =eth0 ^docker,lo); empty sets neither. More per-node NCCL\n"
            "variables (NCCL_IB_HCA...) go in this host's sglang_server_env.")),
)
