# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""extraction_job's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_verify import ACCEPT_FAILED_WHAT, accept_failed_error
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_int, show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import (
    UNIT_NAME, Rule, durable_path, number, owned_dir, path, pattern, secret_string, unit_name)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import NO_DEFAULT, EntryPoint, Variable

ROLE = 'extraction_job'

# the job's own rule (eagle3_extraction_job/names.py JOB_RE; a unit test holds them equal): no '-',
# since a rid is <name>-<sample id> and the first '-' of a dump's name separates the two
JOB_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.]{0,63}')
# a template unit's prefix, which the role makes <name>@.service of: no '@', no suffix
TEMPLATE_UNIT_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9:_.-]{0,200}(?<!\.service)')
URL = re.compile(r'https?://[^\s/?#]+[^\s]*')
# what the job's URL may call: the scheme, a host, a port in range when given (urlsplit's own reading)
URL_WHAT = 'an http:// or https:// URL with a host and a port from 1 to 65535 (when given)'
SHARDS_MAX = 100000
# the gateway's Mooncake transfer buffer (gateway_config.py takes 0 to 1 TiB; under 16 MiB no feature of a long
# prompt fits a transfer)
MIN_BUFFER_BYTES = 16 << 20
MAX_BUFFER_BYTES = 1 << 40


def _shard_count(value):
    count = inventory_int(value, 12)
    if count is None:
        return 'not an integer'
    return None if 1 <= count <= SHARDS_MAX else 'out of range'


def _shard_indexes(value):
    if not isinstance(value, (list, tuple)) or not value:
        return 'not a non-empty list'
    seen = set()
    for item in value:
        index = inventory_int(item, 12)
        if index is None or not 0 <= index < SHARDS_MAX:
            return 'refused at %s (not a shard index: an integer from 0)' % show(item)
        if index in seen:
            return 'refused at %s (given twice: a shard is sent once)' % show(item)
        seen.add(index)
    return None


def _server_url(value):
    if not isinstance(value, str) or not URL.fullmatch(value):
        return 'not allowed'
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:   # urlsplit refuses a port that is not a number from 0 to 65535
        return 'a URL whose port is not a number from 1 to 65535'
    if not parts.hostname:
        return 'a URL without a host'
    return 'a URL whose port is 0' if port == 0 else None


def _absolute_dataset(value):
    # a relative path was checked in the controller's working dir and copied from Ansible's search path (the
    # role's files/, the playbook's dir): two different files, or a copy that failed after the install
    if value == '':
        return None
    return None if isinstance(value, str) and value.startswith('/') else 'not an absolute path'


def _api_key_text(value):
    # the job reads the key file stripped and refuses whitespace or a control character in the key
    if any(ord(char) < 33 or ord(char) == 127 for char in value):
        return 'extraction_job_api_key=(hidden) holds whitespace or a control character; give the key alone'
    return None


def _whole_buffer_bytes(value):
    if isinstance(value, bool) or not isinstance(value, int):
        return 'not a whole number of bytes'
    return None if MIN_BUFFER_BYTES <= value <= MAX_BUFFER_BYTES else 'out of range'


DEFAULTS_HEADER = ()

ENTRY_POINTS = (
    EntryPoint(
        'main', (
            "Run the extraction job next to each SGLang server: send this host's shard, drain the dumps into "
            'SpecForge files, resume after anything'),
        description=[
            (
                'Installs the job (the Python package C(eagle3_extraction_job), its wheel built on the controller, '
                "by pip into the job's venv) and a systemd template unit C(<extraction_job_unit>@.service), one "
                "instance per shard, started after the server's unit."),
            (
                'The job sends each sample of the shard (rid C(<name>-<id>), C(max_new_tokens: 1)) and turns each '
                'dump into C(rows_<g>-<g+2000>/data_<idx>.ckpt) through a temporary name, fsync and rename, '
                'recorded in a SQLite manifest before the dump is deleted. It refuses to start when the output '
                'disk cannot hold the shard.'),
            (
                'Re-running resumes: exactly the samples not done are sent. C(playbooks/status.yml) shows '
                'progress, C(playbooks/verify.yml) proves the output, C(tasks_from: stop) stops every shard unit.'),
            (
                'With O(extraction_job_mode=online) there is no dataset and no shard unit: the role installs the '
                "same package, checks that Mooncake's client (C(mooncake.store)) imports in the venv, writes the "
                "capture gateway's config from the host plan's C(online) section and a template unit "
                'C(<extraction_job_gateway_unit>@<name>.service), starts it and waits for its C(/health).'),
        ]),
    EntryPoint(
        'stop', 'Stop every shard unit and capture gateway of the job on this host',
        options={'extraction_job_unit': {}, 'extraction_job_gateway_unit': {}}),
    EntryPoint(
        'start', 'Start the units of the given shards on this host (each resumes and redoes what is missing)',
        options={
            'extraction_job_unit': {},
            'extraction_job_name': {'description': "The job's name, as for the role's main entry point (its units "
                                                   'are C(<unit>@<name>-shard-<i>)).'},
            'extraction_job_shard_indexes': {'description': 'The shards whose units to start '
                                                            '(C(playbooks/repair.yml) gives those with samples to '
                                                            'redo).',
                                             'type': 'list',
                                             'elements': 'int',
                                             'required': True,
                                             'default': NO_DEFAULT},
        }),
)

VARIABLES = (
    Variable(
        'extraction_job_mode', 'str', 'files',
        description=[
            (
                'C(files): the job sends its shard of O(extraction_job_dataset) and drains the dumps into SpecForge '
                'files. C(online) (training while extracting): no dataset and no shard units; a capture gateway '
                "beside the server (C(<extraction_job_gateway_unit>@<name>)) serves SpecForge's producer and puts "
                "each prompt's features into Mooncake (the host plan's C(online) section says where)."),
            'The same on every server of a job: the host plan reads it of every host.',
        ],
        choices=['files', 'online'], peer=True,
        comment=(
            'files: the job makes SpecForge files of the dataset; online: a capture gateway serves\n'
            "SpecForge's producer, the features go into Mooncake (no dataset here). The same on every server\n"
            'of a job.')),
    Variable(
        'extraction_job_dataset', 'str', '',
        description=(
            'The dataset, JSON Lines (README "Running an extraction"): an absolute path on the controller, copied '
            'to each host (or on the host with O(extraction_job_dataset_on_host)). Required in the C(files) mode; '
            "the C(online) mode has none (SpecForge's producer owns the dataset). A relative path is refused: the "
            "check would read it in the controller's working directory and the copy in Ansible's search path."),
        rule=Rule(_absolute_dataset, 'an absolute path (a relative one is looked up in two places: the check in '
                                     "the controller's working directory, the copy in Ansible's search path)"),
        comment=(
            'The dataset (JSON Lines: id + input_ids + loss_mask, or id + conversations), an absolute path\n'
            'on the controller copied to each host; with extraction_job_dataset_on_host, a path on the host.')),
    Variable(
        'extraction_job_dataset_on_host', 'bool', False,
        description='O(extraction_job_dataset) is a path on the host (shared storage): nothing is copied.'),
    Variable(
        'extraction_job_dataset_format', 'str', 'auto',
        description=(
            'C(tokenized) (id, input_ids, loss_mask), C(conversations) (id, conversations) or C(auto) (by each '
            'line).'),
        choices=['auto', 'tokenized', 'conversations'],
        comment="auto (by each line's keys), tokenized or conversations."),
    Variable(
        'extraction_job_name', 'str', 'extraction',
        description=(
            "The job's name, C([A-Za-z0-9_][A-Za-z0-9_.]{0,63}) (no C(-): rids are C(<name>-<sample id>)); also "
            'the output subdir. Another dataset needs another name.'),
        rule=pattern(JOB_NAME, 'letters, digits, _ and . (up to 64, not starting with .; no -: a rid is '
                               '<name>-<sample id>)'),
        peer=True,
        comment="The job's name: the rid prefix (<name>-<sample id>) and the output subdir. No '-'."),
    Variable(
        'extraction_job_shard_indexes', 'raw', "{{ lookup('eagle3.extraction.host_plan').job.shards }}",
        description=(
            "This host's shards, a non-empty list of distinct indexes from 0 to O(extraction_job_shard_count) - 1. "
            "Default its place among C(groups['extraction_servers']) sorted by name (the host's plan, the lookup "
            "C(eagle3.extraction.host_plan)); give a dead host's index to another host to hand its shard over."),
        rule=Rule(_shard_indexes, 'a non-empty list of distinct shard indexes (integers from 0)'), plan=True,
        comment=(
            "Shards: this host's place among the inventory's extraction servers (sorted by name), and\n"
            "their count: the host's plan (plugins/plugin_utils/host_plan.py). A host can take over a dead\n"
            "host's shard: extraction_job_shard_indexes: [1, 2].")),
    Variable(
        'extraction_job_shard_count', 'raw', "{{ lookup('eagle3.extraction.host_plan').job.shard_count }}",
        description=(
            'How many shards the dataset is split into (by a stable hash of each id), 1 or more. Default the '
            "number of extraction servers (the host's plan)."),
        rule=Rule(_shard_count, 'an integer from 1 to %d' % SHARDS_MAX), plan=True),
    Variable(
        'extraction_job_output_root', 'path', '/srv/eagle3-extraction',
        description=(
            'Durable storage for the output: C(<root>/<name>/shard-<i>-of-<n>/). Not on a memory filesystem (under '
            "C(/dev/shm) or C(/run)), under the system's dirs (C(/etc)...) nor inside the server's dump dir."),
        rule=durable_path(), plan=True,
        comment='Output: <root>/<name>/shard-<index>-of-<count>/ (manifest, card, status, rows_*/data_*.ckpt).'),
    Variable(
        'extraction_job_server_url', 'str', "{{ lookup('eagle3.extraction.host_plan').job.server_url }}",
        description=[
            "The local server's base URL (C(http://) or C(https://)).",
            (
                "Default the URL a client on this host calls its server at (the host's plan, the lookup "
                'C(eagle3.extraction.host_plan)), that is the port and host its C(sglang_server_flags) give, '
                "loopback for a wildcard bind, rank 0's on a node of rank > 0."),
        ],
        rule=Rule(_server_url, URL_WHAT), plan=True,
        comment=(
            "The server's URL and its dump dir: the host's plan's, that is the URL a client on this host calls\n"
            "its server at (the port and host its flags really give) and the server's dump dir.")),
    Variable(
        'extraction_job_dump_dir', 'path', "{{ lookup('eagle3.extraction.host_plan').job.dump_dir }}",
        description=(
            "Where the capture writes dumps (the server's C(SGLANG_HS_DUMP_DIR)); C(<dir>.undrained-*) are drained "
            "too. Default the server's, C(sglang_server_dump_dir) (the host's plan)."),
        rule=path(), plan=True),
    Variable(
        'extraction_job_model_path', 'str', "{{ sglang_server_model_path | default('') }}",
        description=(
            "The model dir on the host: C(config.json)'s C(hidden_size) and its sha256 for the dataset card; the "
            'default tokenizer.'),
        comment="Its model and its key: sglang_server's."),
    Variable(
        'extraction_job_api_key', 'str', '',
        description=(
            "The server's API key (Ansible Vault); written to a root-only file the job reads, never onto a command "
            "line or into a log. Empty takes the server's, C(sglang_server_api_key) (when it is set)."),
        no_log=True, rule=secret_string('extraction_job_api_key', _api_key_text),
        comment=(
            "the key: empty takes the server's (sglang_server_api_key), in vars/main.yml, so that no rendered\n"
            "key is this option's default (ansible-core prints a role's spec, defaults templated, when a value fails it)")),
    Variable(
        'extraction_job_hidden_size', 'int', 0,
        description='The hidden size; 0 reads it from the model.',
        rule=number(0, 1048576),
        comment="0: read hidden_size from the model's config.json. Captured layers: 3 for EAGLE-3."),
    Variable(
        'extraction_job_captured_layers', 'int', 3,
        description='How many aux layers the capture dumps (3 for EAGLE-3).',
        rule=number(1, 64)),
    Variable(
        'extraction_job_tokenizer_path', 'str', '',
        description='Conversations: the tokenizer dir on the host; empty uses O(extraction_job_model_path).',
        comment="Conversations: the tokenizer (default the model dir) and the chat template's markers."),
    Variable(
        'extraction_job_chat_assistant_header', 'str', '',
        description=(
            "Conversations: the text that starts an assistant turn in the chat template (SpecForge's "
            'C(assistant_header)), for example C(<|im_start|>assistant\\n) for Qwen.'), template_text=True),
    Variable(
        'extraction_job_chat_end_of_turn', 'str', '',
        description=(
            "Conversations: the token that ends a turn (SpecForge's C(end_of_turn_token)), for example "
            'C(<|im_end|>\\n) for Qwen.'), template_text=True),
    Variable(
        'extraction_job_chat_system_prompt', 'str', '',
        description='Conversations: the system prompt added when a conversation has none.', template_text=True),
    Variable(
        'extraction_job_chat_ignore_tokens', 'list', [],
        description=(
            "Conversations: text never trained on, wherever it occurs (SpecForge's C(ignore_token), e.g. Qwen3's "
            'empty think block).'),
        elements='str', template_text=True),
    Variable(
        'extraction_job_max_length', 'int', 0,
        description='Conversations: truncate to this many tokens; 0 does not truncate.',
        rule=number(0, 16777216, 'tokens (0: the model\'s)')),
    Variable(
        'extraction_job_concurrency', 'int', 16,
        description=(
            "Requests at the server at once (a slot is given back when the server answers; the dump dir's "
            'watermarks bound the dumps waiting for the drain).'),
        rule=number(1, 4096),
        comment='Sending.'),
    Variable(
        'extraction_job_request_timeout', 'float', 600,
        description="Seconds one request to the server may take (the online mode's gateway's too).",
        rule=number(1, 86400, 'seconds')),
    Variable(
        'extraction_job_accept_failed', 'list', [],
        description=(
            'Failed samples accepted as not extracted (the server refused them, or their dump was rejected), each '
            'by its sample id, whole: no pattern, no wildcard. The job sends them no more and ends its shard '
            "C(complete) without them; C(playbooks/verify.yml) passes, naming each with its dataset line and "
            'reason, and refuses an id that did not fail (README "Recovery").'),
        elements='str', rule=Rule(accept_failed_error, ACCEPT_FAILED_WHAT)),
    Variable(
        'extraction_job_max_attempts', 'int', 8,
        description=(
            'Tries per sample in one run (with doubling backoff) before it is reported failed; a restart tries '
            'again.'),
        rule=number(1, 1000)),
    Variable(
        'extraction_job_ack_timeout', 'float', 600,
        description=(
            'Seconds after a 200 before a missing dump counts as lost and the sample is sent again (the online '
            "mode's gateway answers that prompt's row with an error: the producer leases it again)."),
        rule=number(1, 86400, 'seconds')),
    Variable(
        'extraction_job_stall_window', 'float', 900,
        description=(
            'Seconds without a settled sample (a durable file or a recorded failure) while samples are left and the '
            'server is healthy before the shard counts as stalled (a hung drain, a wedged server, a lost request): '
            'status shows C(stalled) with what it waits on, and the job restarts itself. The wait for an unhealthy '
            'server or a full output disk does not count.'),
        rule=number(1, 604800, 'seconds'),
        comment='The stall watchdog (README "Recovery").'),
    Variable(
        'extraction_job_stall_restarts_max', 'int', 3,
        description=(
            'Restarts after a stall, in a row (the count goes back to 0 at the next settled sample), before the job '
            'stops with the final state C(stalled) instead of restarting; 0 stops at the first stall.'),
        rule=number(0, 1000)),
    Variable(
        'extraction_job_capture_check', 'bool', True,
        description=[
            (
                'Check the capture against the server itself at the first request and whenever the server may have '
                'restarted (a failed request or C(/health), a new capture in C(CAPTURE_STATS.json)): one short '
                'prompt alone, its dump equal bit for bit to the aux layers SGLang returns through '
                'C(return_hidden_states). A mismatch stops the shard (C(capture_mismatch) in status.json, with the '
                'layer and the max abs diff), writing nothing more.'),
            (
                "The server needs C(--enable-return-hidden-states): the host plan adds it to the server's flags "
                'while this is on in the files mode (the same on every node of a server). The flag cost nothing '
                "measurable on one H100 (docs/benchmarks.md, \"The server flags the roles add\")."),
        ],
        plan=True, same_on_every_node=True,
        comment="The capture checked against the server's return_hidden_states after each (re)start."),
    Variable(
        'extraction_job_drain_workers', 'int', 4,
        description='Threads turning dumps into files.',
        rule=number(1, 256),
        comment='Draining and backpressure.'),
    Variable(
        'extraction_job_shm_high', 'float', 0.7,
        description='Stop sending when the dump dir filesystem is this full (0 to 1).',
        rule=number(0.01, 0.99)),
    Variable(
        'extraction_job_shm_low', 'float', 0.5,
        description='Send again when it is back under this (0 to 1, at most O(extraction_job_shm_high)).',
        rule=number(0.0, 0.99)),
    Variable(
        'extraction_job_output_free_floor_gib', 'float', 8,
        description='Stop sending when the output disk has less free (GiB).',
        rule=number(0, 1048576, 'GiB')),
    Variable(
        'extraction_job_output_free_resume_gib', 'float', 12,
        description='Send again above this (GiB, at least the floor).',
        rule=number(0, 1048576, 'GiB')),
    Variable(
        'extraction_job_space_margin', 'float', 0.1,
        description=(
            'Refuse to start unless the output disk holds the rest of the shard plus this fraction of it (and the '
            'floor); 0 to 1 (0.1 is 10%).'),
        rule=number(0, 1, '(a fraction: 0.1 is 10%)')),
    Variable(
        'extraction_job_python', 'str', "{{ lookup('eagle3.extraction.ml_env_python') }}",
        description=(
            "The venv's interpreter; it needs torch, aiohttp, pip and packaging (and transformers for "
            "conversations), which sglang's venv has. The job is installed into this venv with pip."),
        rule=path(what='an absolute path'),
        comment='Where and how it runs.'),
    Variable(
        'extraction_job_install_dir', 'path', '/opt/eagle3-extraction-job',
        description=(
            "Where the job's wheel is copied (the job itself is installed into the venv of "
            "C(extraction_job_python)); the units' working dir."),
        rule=owned_dir()),
    Variable(
        'extraction_job_config_dir', 'path', '/etc/eagle3-extraction',
        description='Root-only dir (0700) for the per-shard configs and the key file.',
        rule=owned_dir()),
    Variable(
        'extraction_job_data_dir', 'path', '/var/lib/eagle3-extraction',
        description='Where a copied dataset is kept on the host.',
        rule=owned_dir()),
    Variable(
        'extraction_job_log_dir', 'path', '/var/log/eagle3-extraction',
        description='Where each shard unit appends its log, C(<name>-shard-<i>.log).',
        rule=owned_dir()),
    Variable(
        'extraction_job_metrics_dir', 'path', "{{ lookup('eagle3.extraction.host_plan').job.metrics_dir }}",
        description=(
            "node_exporter's textfile collector dir (Debian's C(prometheus-node-exporter) reads "
            'C(/var/lib/prometheus/node-exporter)): at each status tick every shard writes its Prometheus metrics '
            'there, C(eagle3_extraction_<name>_shard<i>.prom) (samples done, tokens/s, ETA, state, /dev/shm, output '
            'disk, errors, the time of the last durable sample...), atomically. Empty: no metrics. Default (the '
            "host's plan): the role C(eagle3.extraction.monitoring)'s C(monitoring_textfile_dir) when "
            'C(monitoring_prometheus_host) is set, else empty.'),
        rule=path(empty=True), plan=True),
    Variable(
        'extraction_job_unit', 'str', 'eagle3-extraction-job',
        description='The systemd template unit, without C(@.service); one instance per shard.',
        rule=unit_name(TEMPLATE_UNIT_NAME, "a template unit's name without @.service: letters, digits and :_.-")),
    Variable(
        'extraction_job_systemd_dir', 'path', '/etc/systemd/system',
        description='Where the unit file is written.',
        rule=path()),
    Variable(
        'extraction_job_server_unit', 'str', "{{ lookup('eagle3.extraction.host_plan').server.unit }}",
        description=(
            "The server's unit: the job starts after it (default the host's plan's, sglang_server_unit's value)."),
        rule=pattern(UNIT_NAME, 'a unit name without .service: letters, digits and :_.@-')),
    Variable(
        'extraction_job_restart_sec', 'int', 30,
        description='Seconds before systemd restarts an incomplete job (it resumes).',
        rule=number(0, 86400, 'seconds')),
    Variable(
        'extraction_job_gateway_port', 'int', 30100,
        description=(
            "The online mode: the capture gateway's port, 1 to 65535, on the server's bind host; SpecForge's "
            'producer calls C(http://<address>:<port>) (the host plan\'s C(online.server_urls)).'),
        rule=number(1, 65535), peer=True,
        comment="The online mode's capture gateway: its port (the producer's server_urls) and unit.",
        group=True),
    Variable(
        'extraction_job_gateway_unit', 'str', 'eagle3-capture-gateway',
        description=(
            'The online mode: the gateway\'s systemd template unit, without C(@.service); its instance is the '
            "job's name."),
        rule=unit_name(TEMPLATE_UNIT_NAME, "a template unit's name without @.service: letters, digits and :_.-"),
        plan=True),
    Variable(
        'extraction_job_gateway_store_threads', 'int', 8,
        description=(
            "The online mode: the gateway's threads that load and check dumps and put them into Mooncake "
            '(the prompts it stores at once).'),
        rule=number(1, 256)),
    Variable(
        'extraction_job_gateway_max_prompts', 'int', 1024,
        description="The online mode: the most prompts one producer request may hold (a larger one gets 400).",
        rule=number(1, 65536)),
    Variable(
        'extraction_job_gateway_local_buffer_bytes', 'int', 512 << 20,
        description=(
            "The online mode: the gateway's Mooncake client's local transfer buffer, in bytes (a whole number, "
            '16 MiB to 1 TiB). The client mounts no segment: the features go to the master host\'s.'),
        rule=Rule(_whole_buffer_bytes, 'a whole number of bytes from %d (16 MiB) to %d (1 TiB)'
                  % (MIN_BUFFER_BYTES, MAX_BUFFER_BYTES))),
    Variable(
        'extraction_job_gateway_stop_timeout', 'float', 120,
        description=(
            'The online mode: seconds a stopped gateway gives the prompts in flight to reach the store before it '
            'ends (their dumps stay, unanswered; the producer leases them again).'),
        rule=number(1, 86400, 'seconds')),
    Variable(
        'extraction_job_gateway_server_wait', 'float', 120,
        description=(
            'The online mode: seconds a prompt waits for its server to answer again (killed, restarting) while the '
            'gateway sends it again under the same rid; after that its row fails and the producer leases it again. '
            "Keep it under SpecForge's own timeout for one request (300 s) and above the server's restart time."),
        rule=number(1, 86400, 'seconds')),
    Variable(
        'extraction_job_gateway_ready_timeout', 'int', 300,
        description=(
            "The online mode: seconds the role waits for the gateway's C(/health) to answer 200 (its server "
            'answers and its Mooncake client is set up) before it fails, naming the unit and its last log lines.'),
        rule=number(1, 86400, 'seconds')),
    Variable(
        'extraction_job_state', 'str', 'started',
        description='C(started) (re)starts each shard unit (a finished shard exits at once), C(stopped) stops them.',
        choices=['started', 'stopped'],
        comment="started: (re)start each shard's unit (a finished shard exits at once); stopped: stop them."),
)
