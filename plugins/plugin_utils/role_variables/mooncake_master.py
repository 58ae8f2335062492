# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""mooncake_master's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_variables.ml_env import DEBIAN_PACKAGE, REQUIREMENT
from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import HOST, Rule, each, number, path, pattern
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'mooncake_master'

MIB = 1 << 20
# the least global segment worth mounting: a sample's aux and last hidden states of a large model are tens of MiB
MIN_SEGMENT_BYTES = 64 * MIB
# the largest a host could give (1 PiB): a bigger number is a typo
MAX_SEGMENT_BYTES = 1 << 50
# a kv lease shorter than this lets Mooncake drop an object between its put and the trainer's read under load
# (-707 LEASE_EXPIRED was seen at 500 ms; SpecForge's recipes use 10 s)
MIN_LEASE_MS = 1000
MAX_LEASE_MS = 24 * 3600 * 1000
DEFAULTS_HEADER = ()


def _whole_bytes(value):
    """The global segment: a whole number of bytes (never a float or a '4 GB' string), at least 64 MiB."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 'not a whole number of bytes'
    if not MIN_SEGMENT_BYTES <= value <= MAX_SEGMENT_BYTES:
        return 'out of range'
    return None


ENTRY_POINTS = (
    EntryPoint(
        'main', "Run Mooncake's master and the global segment that holds the online mode's features",
        description=[
            (
                'Makes a venv at O(mooncake_master_venv) with O(mooncake_master_package) (through the install steps '
                'of the role C(eagle3.extraction.ml_env), offline from O(mooncake_master_wheelhouse) when set) and '
                "runs two systemd units: C(eagle3-mooncake-master.service), Mooncake's master with its "
                'HTTP metadata server, and C(eagle3-mooncake-segment.service), C(mooncake_client) mounting a global '
                'segment of O(mooncake_master_segment_bytes) that keeps the objects the servers put and the '
                'trainers read.'),
            (
                'Both advertise O(mooncake_master_host) (default: the address the other hosts reach this one at). '
                "After a (re)start it waits until the metadata server answers, the master's metrics show the "
                'segment mounted (capacity at least O(mooncake_master_segment_bytes)) and the segment advertises '
                'that address, or fails saying which of them is not up.'),
            'A second run changes nothing. Supports check mode.',
            'Sets the fact C(mooncake_master_deployed): the units, the addresses the clients give Mooncake.',
        ]),
    EntryPoint(
        'stop', (
            'Stop the segment holder, then the master (what the store held is gone: an online run redoes the '
            'prompts whose features it held and the trainer had not consumed)'),
        options={}),
)

VARIABLES = (
    Variable(
        'mooncake_master_venv', 'str', '/root/mooncake-env',
        description='Absolute path of the venv Mooncake is installed in, not a system directory.',
        rule=path(),
        comment='The venv Mooncake is installed in, and the interpreter that makes it.'),
    Variable(
        'mooncake_master_python', 'str', '/usr/bin/python3',
        description="The interpreter that makes the venv; it needs the C(venv) module (Debian's C(python3-venv)).",
        rule=path(what='an absolute path')),
    Variable(
        'mooncake_master_system_packages', 'list', ['libibverbs1', 'libnuma1', 'libcurl4'],
        description=(
            "The Debian packages Mooncake's binaries link against (C(ldd mooncake_master)), installed with apt (the "
            'role C(eagle3.extraction.ml_env)\'s O(ml_env_system_packages)) before the venv is made.'),
        elements='str',
        rule=each(pattern(DEBIAN_PACKAGE, 'a Debian package name such as libibverbs1'))),
    Variable(
        'mooncake_master_package', 'str', 'mooncake-transfer-engine-non-cuda==0.3.13.post1',
        description=[
            (
                "Mooncake's wheel as a pinned requirement. The default is the build without CUDA, which the "
                'master and a TCP segment need; on a host with CUDA V(mooncake-transfer-engine==0.3.13.post1) '
                'serves too. A requirement, never a pip option.'),
        ],
        rule=pattern(REQUIREMENT, 'a requirement spec such as mooncake-transfer-engine-non-cuda==0.3.13.post1'),
        comment=(
            "Mooncake's wheel: the build without CUDA; mooncake-transfer-engine==0.3.13.post1 on a\n"
            'host with CUDA.'),
        group=True),
    Variable(
        'mooncake_master_wheelhouse', 'str', '',
        description=(
            'Absolute path of a directory of wheels on the target; when set, pip installs from it alone '
            '(C(--no-index --find-links)). Empty uses the package index.'),
        rule=path(empty=True),
        comment=(
            'A directory of wheels on the target: when set, pip installs from it alone.\n'
            'mooncake_master_wheelhouse_src, a directory on the controller, is copied there first.')),
    Variable(
        'mooncake_master_wheelhouse_src', 'str', '',
        description=(
            'A directory of wheels on the controller, copied into O(mooncake_master_wheelhouse) first; empty copies '
            'nothing.')),
    Variable(
        'mooncake_master_pip_extra_args', 'str', '',
        description='More options for the pip install, for example V(--extra-index-url https://example.org/simple).',
        comment='More pip options, for example "--extra-index-url URL".'),
    Variable(
        'mooncake_master_host', 'str', '',
        description=[
            (
                'The address the master and the segment bind and advertise, as the servers, gateways and trainers '
                "reach this host. Empty is the host's C(ansible_host) (else its inventory name); a container "
                'reached through its hypervisor (C(ansible_connection=community.proxmox.proxmox_pct_remote)) must '
                "set it. The segment advertises it to Mooncake's transfer engine (C(MC_TCP_BIND_ADDRESS), "
                'C(MOONCAKE_LOCAL_HOSTNAME)): an address the peers cannot reach, such as a container bridge\'s, makes '
                'their reads fail with -800.'),
        ],
        rule=pattern(HOST, 'an address or host name the other hosts reach', empty=True),
        comment=(
            'The address the master and the segment bind and advertise; empty: ansible_host.\n'
            'A container reached through pct must set it.'),
        group=True, peer=True),
    Variable(
        'mooncake_master_rpc_port', 'int', 35551,
        description="The master's RPC port (C(--rpc_port)), 1 to 65535: the clients' C(master_server_address).",
        rule=number(1, 65535), peer=True),
    Variable(
        'mooncake_master_metadata_port', 'int', 35880,
        description=(
            "The master's HTTP metadata server's port (C(--http_metadata_server_port)), 1 to 65535: the clients' "
            'C(metadata_server) is C(http://HOST:PORT/metadata).'),
        rule=number(1, 65535), peer=True),
    Variable(
        'mooncake_master_metrics_port', 'int', 35903,
        description="The master's metrics port (C(--metrics_port)), 1 to 65535: Prometheus text at C(/metrics).",
        rule=number(1, 65535), peer=True),
    Variable(
        'mooncake_master_segment_port', 'int', 50052,
        description="The segment holder's (C(mooncake_client)'s) service port (C(--port)), 1 to 65535.",
        rule=number(1, 65535), peer=True),
    Variable(
        'mooncake_master_segment_bytes', 'int', 32 << 30,
        description=[
            (
                'The global segment the segment holder mounts, in bytes: a whole number, at least 64 MiB '
                '(V(67108864)). The features of the samples in flight live there until the trainer removes them; '
                'the host needs this much memory free. The default, 32 GiB, is SpecForge 0.2.0\'s '
                'C(global_segment_size_bytes).'),
        ],
        rule=Rule(_whole_bytes, 'a whole number of bytes from %d (64 MiB) to %d' % (MIN_SEGMENT_BYTES,
                                                                                    MAX_SEGMENT_BYTES)),
        comment="The global segment in bytes (32 GiB, SpecForge's default); the host needs it free.",
        group=True, peer=True),
    Variable(
        'mooncake_master_kv_lease_ms', 'int', 10000,
        description=[
            (
                "The master's kv lease in milliseconds (C(--default_kv_lease_ttl)), at least 1000: an object is "
                "kept at least this long after its last read. SpecForge's recipes use 10 s; 500 ms gave -707 "
                '(LEASE_EXPIRED) under load.'),
        ],
        rule=number(MIN_LEASE_MS, MAX_LEASE_MS, 'milliseconds'),
        comment="The kv lease in ms (SpecForge's recipes use 10 s; 500 ms gave -707 LEASE_EXPIRED under load)."),
    Variable(
        'mooncake_master_ready_timeout', 'int', 120,
        description=(
            'Seconds to wait after a (re)start for the metadata server to answer and the segment to be mounted, '
            '1 to 3600.'),
        rule=number(1, 3600, 'seconds'),
        comment='Seconds to wait for the master and the segment after a (re)start.', group=True),
)
