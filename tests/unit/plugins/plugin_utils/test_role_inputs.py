"""Each role variable refuses the bad values a new user types, naming the variable, through
its argument spec (Ansible's ArgumentSpecValidator over meta/argument_specs.yml) and the
rules that format cannot hold (plugin_utils/role_inputs.py); the good values pass."""

import os

import pytest
import yaml

from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_inputs import (
    RULES, ROLES, TEMPLATE_TEXT, cross_host_errors, host_value_errors, load_specs, role_value_errors,
    rollout_errors)

SPECS = load_specs()
ROLE_OF = dict((name, role) for role, options in SPECS.items() for name in options)
NAN, INF = float('nan'), float('inf')
KEY = 'sk-secret-value-0123'

BAD = {
    'proxmox_container_node': ['pve 1', 'pve1\n', '-pve', ['pve1'], 'pve1;reboot'],
    'proxmox_container_vmid': [-1, 0, 99, 1000000000, 'abc', '471\n', True, 1.5, [471]],
    'proxmox_container_ostemplate': ['local:vztmpl/a b.tar', 'x\n', 'vztmpl.tar'],
    'proxmox_container_storage': ['local lvm', '-x', 'a\n', ''],
    'proxmox_container_rootfs_size': [-5, 131073, 'big', True, 1e300],
    'proxmox_container_ssh_public_keys': [['not a key'], ['ssh-ed25519 AAAA\nssh-rsa BBBB'], [''], 'ssh-ed25519'],
    'proxmox_container_hostname': ['host_name', 'a..b', '-a', 'x' * 64, 'a\n'],
    'proxmox_container_net': [{'eth0': 'bridge=vmbr0'}, {'net0': ['x']}, {'net0': 'ip=1.2.3.4\nlxc.x: y'}, 'net0'],
    'proxmox_container_cores': [0, -1, 8193, 'eight', True],
    'proxmox_container_memory': [0, 15, -1, 268435457, 'lots'],
    'proxmox_container_swap': [-1, 268435457, 'none'],
    'proxmox_container_features': [{'nesting': 'yes please'}, {'bogus': True}, {'nesting\n': True}],
    'proxmox_container_shm_size': ['64G\n', '-5', '0', '64 G', '64GB', 'big', '', '50%%', '64G,uid=0'],
    'proxmox_container_gpus': ['some', [], [-1], [64], [True], ['0'], 0],
    'proxmox_container_extra_devices': [['dri/renderD128'], ['/dev/dri\n'], ['/dev/x,gid=abc'], ['/etc/passwd']],
    'proxmox_container_raw_lxc': [['lxc.cgroup2.devices.allow c 195:* rwm'], ['x: y'], ['lxc.a: b\nlxc.c: d'],
                                  ['lxc.a:']],
    'proxmox_container_shutdown_timeout': [0, -1, 86401, NAN, 'soon'],
    'proxmox_container_wait_timeout': [0, -10, 86401, INF],
    'proxmox_container_unprivileged': ['maybe', 2, [True]],
    'proxmox_container_allow_restart': ['sometimes', 5],
    'gpu_check_nvidia_smi_path': ['nvidia-smi', '/usr/bin/nvidia-smi\n', '/usr/bin', '/usr/../bin/nvidia-smi'],
    'gpu_check_driver_version': ['580.159.04\n', 'v580', '580.', 'latest', '580.159.04.1'],
    'gpu_check_driver_version_min': ['580\n', '>=580', 'x'],
    'gpu_check_gpu_count': [-1, 65, 'eight', True, 2.5],
    'gpu_check_gpu_model': ['NVIDIA H200\n', 'NVIDIA\tH200'],
    'gpu_check_memory_used_max_mib': [-1, 1048577, 'none'],
    'gpu_check_hypervisor': ['pve 1', 'pve1\n'],
    'gpu_check_reclaim_signal_timeout': [0, -1, 3601, NAN],
    'gpu_check_reclaim_kill_timeout': [0, 3601, INF],
    'gpu_check_reclaim_wait_timeout': [0, -5, 86401],
    'gpu_check_require_idle': ['perhaps'],
    'ml_env_path': ['/', '/usr', '/root', '/etc', '/usr/local', 'relative/venv', '/root/../etc', '/proc/self',
                    '/root/ml env', '/opt/venv\n', ''],
    'ml_env_python': ['python3', '/usr/bin/python3\n', ''],
    'ml_env_packages': [['--index-url=http://evil'], ['-e /tmp/x'], ['sglang==0.5.23\n'], ['sglang; rm -rf /;\n'],
                        ['']],
    'ml_env_wheelhouse': ['wheels', '/tmp', '/root/wh\n'],
    'ml_env_editable': [['relative/src'], ['/'], ['/root/src\n']],
    'ml_env_import_checks': [['sglang launch'], ['sglang.'], ['1sglang'], ['sglang\n']],
    'ml_env_pip_extra_args': ['--pre\n--index-url x'],
    'sglang_patch_state': ['installed', 'PRESENT', ''],
    'sglang_patch_python': ['python', '/usr/bin/python3\n'],
    'sglang_patch_backup': ['often'],
    # a name with its .service (the role adds it: After=x.service.service)
    'sglang_server_unit': ['sglang extraction', 'sglang\n', '-x', '../evil', '', 'sglang-extraction.service'],
    'sglang_server_python': ['python', '/root/ml-env/bin/python\n'],
    'sglang_server_module': ['sglang.launch_server --api-key x', 'sglang/launch_server', 'sglang.\n'],
    'sglang_server_model_path': ['models/kimi', '/srv/models\n', '/', '/usr'],
    'sglang_server_host': ['0.0.0.0\n', 'a host', ''],
    'sglang_server_port': [0, -1, 65536, 'http', True, 80.5, '80\n', 'inf', '1e999'],
    'sglang_server_tp_size': [0, -1, 'eight', True, 257, 2.5, '8\n'],
    'sglang_server_flags': [{'port\n': 1}, {'--port': 1}, {'api-key': 'x'}, {'config': '/x.yaml'},
                            {'disable-cuda-graph': True}, {'chat-template': 'a\nb'},
                            {'mem-fraction-static': NAN}, 'not a dict',
                            # the four flags of their own variables, whatever their value
                            {'port': 30000}, {'host': '0.0.0.0'}, {'tp-size': 8}, {'model-path': '/srv/models/m'},
                            # the value of a flag the role reads itself (the preflight asserted it)
                            {'mem-fraction-static': 1.5},
                            {'mem-fraction-static': 0}, {'mem-fraction-static': 1}, {'mem-fraction-static': 'most'}],
    'sglang_server_extra_args': [['value-first'], ['--ok', 'a\nb'], ['--api-key', 'x'], ['--config', 'y.yaml'],
                                 # the four flags of their own variables, however typed
                                 ['--port', '9001', '9002'], ['--port=9001'], ['--host', '0.0.0.0'],
                                 ['--enable-metrics', '--tp-size', '8'], ['--model-path=/srv/models/m']],
    'sglang_server_dump_dir': ['dumps', '/dev/shm', '/', '/tmp', '/dev/shm/hs\n'],
    'sglang_server_shm_min_free_gib': [-5, -0.1, NAN, INF, 'lots', 1e300],
    'sglang_server_undrained_dumps': ['delete', 'MOVE', ''],
    'sglang_server_stale_shm_patterns': [['*'], ['*nccl'], [''], ['nccl-*-*'], ['../x*'], ['a*b'], ['nccl-*\n']],
    'sglang_server_interconnect': ['infiniband', 'NVLink', ''],
    'sglang_server_env': [{'A': 'x\ny'}, {'1A': 'x'}, {'A B': 'x'}, {'A': ['x']}, {'A': {'B': 1}}],
    'sglang_server_api_key': [KEY + '\n', 'sk\r', ' ' + KEY, KEY + ' ', 12345, ['sk'], {'k': 'v'}, 'sk\x00x'],
    'extraction_job_api_key': [12345, 1.5, True, ['sk'], {'k': 'v'}, 'sk key', ' ' + KEY, KEY + '\n', 'sk\x00x'],
    'sglang_server_config_file': ['/etc/sglang/x.conf', 'x.yaml', '/etc/sglang', '/etc/sglang/x.yaml\n'],
    'sglang_server_log_file': ['sglang.log', '/var/log', '/var/log/x.log\n'],
    'sglang_server_stop_timeout': [0, -1, 86401, 'forever'],
    'sglang_server_restart_sec': [-1, 86401, 'soon'],
    'sglang_server_start_limit_burst': [0, 1001, -3],
    'sglang_server_start_limit_interval': [-1, 604801],
    'sglang_server_limit_nofile': [0, 1023, 1073741817, 'unlimited'],
    'sglang_server_hypervisor': ['pve 1', 'pve1\n'],
    'sglang_server_vmid': ['abc', -1, 99, 1000000000, True, '471\n'],
    'sglang_server_ready_timeout': [0, -1, 172801, NAN],
    'sglang_server_name': ['two words', '-duo', 'duo/1', 'x' * 64, 'duo\n'],
    'sglang_server_node_rank': [-1, 1024, 'first', True, 0.5],
    'sglang_server_dist_init_port': [0, 65536, 'port', True],
    # an option, and loopback: the other nodes would call themselves (issue 36)
    'sglang_server_dist_init_host': ['two hosts', 'host;reboot', 'a/b', '--help', '127.0.0.2', '127.0.0.1', '::1',
                                     'localhost', 'localhost.localdomain', '-node'],
    'sglang_server_socket_ifname': ['eth 0', 'eth0;', '^', 'averyveryverylongname0', 'eth0,,eth1', '-eth0',
                                    'eth0,-eth1', '^-x'],
    # no '-': a rid is <name>-<sample id> (the job refuses it: names.JOB_RE)
    # a trailing newline too (match('^...$') let it through)
    'extraction_job_name': ['two words', '../up', '-x', 'x' * 65, 'sharegpt-v2', '.hidden', 'job\n'],
    'extraction_job_dataset': ['train.jsonl', 'data/train.jsonl', '~/train.jsonl', 3],
    'extraction_job_shard_count': [0, -1, 'two', True, 100001, 1.5, '1\n'],
    'extraction_job_shard_indexes': [[], [-1], ['a'], [0, 0], 0, [True], '0'],
    'extraction_job_server_url': ['localhost:30000', 'ftp://x', 'http://', 'http://a b', 'http://x\n',
                                  'http://127.0.0.1:99999', 'http://127.0.0.1:0', 'http://:30000', 'http://x:port'],
    'extraction_job_output_root': ['relative', '/', '/var/lib', '/srv/a b',
                                   # memory filesystems, system dirs (issue 36): lost on reboot, or not ours
                                   '/dev/shm/out', '/dev/shm', '/run/eagle3', '/etc/ssh', '/etc/ssh/out', '/usr/share/x'],
    'extraction_job_dump_dir': ['/dev/shm', 'shm'],
    'extraction_job_python': ['python3', ''],
    'extraction_job_install_dir': ['/opt', 'opt/x', '/opt/x\n', '/opt/x\nExecStartPre=/bin/true'],
    # % in a path: systemd expands it in the unit's ExecStart (issue 36)
    'extraction_job_config_dir': ['/etc', 'etc/x', '/etc/eagle3%i', '/etc/100%'],
    'extraction_job_data_dir': ['/var/lib', '/proc/x'],
    'extraction_job_log_dir': ['/var/log', 'logs', '/var/log/x\n', '/var/log/x\nExecStopPost=/bin/true'],
    # the role writes <unit>@.service: no '@' of its own, no path
    'extraction_job_unit': ['two words', 'a/b', '', '../x', 'x\n', 'a@b', 'user@', 'job.service'],
    'extraction_job_systemd_dir': ['systemd', '/etc', '/etc/systemd/system\n', '/etc/../tmp'],
    # node_exporter's textfile dir: absolute, one line, no % (a unit file would expand it)
    'extraction_job_metrics_dir': ['metrics', '/var/lib', '/var/lib/prometheus/node-exporter\n', '/var/lib/x/../y',
                                   '/var/lib/node%i'],
    'extraction_job_server_unit': ['two words', '', '../x', 'sglang\nExecStartPre=/bin/true', 'sglang\n',
                                   'sglang-extraction.service'],
    'extraction_job_hidden_size': [-1, 1048577, 'big'],
    'extraction_job_captured_layers': [0, 65, 'three'],
    'extraction_job_max_length': [-1, 16777217],
    # 'inf' and '1e999' as strings: ansible-core's int conversion raises OverflowError on them
    'extraction_job_concurrency': [0, 4097, 'many', 'inf', '-inf', '1e999', 'nan'],
    'extraction_job_request_timeout': [0, -1, 86401, NAN],
    'extraction_job_max_attempts': [0, 1001],
    # each accepted failure by its id, whole: a selection that could match every failure is refused
    'extraction_job_accept_failed': [['*'], ['s*'], ['all', '*'], ['s1', 's1'], ['a b'], [''], ['s1\n']],
    'extraction_job_ack_timeout': [0, 86401, INF],
    'extraction_job_stall_window': [0, -1, 604801, INF, NAN, 'soon'],
    'extraction_job_stall_restarts_max': [-1, 1001, 'many'],
    'extraction_job_drain_workers': [0, 257],
    'extraction_job_shm_high': [0, 1, 1.5, -0.1],
    'extraction_job_shm_low': [-0.1, 1, 2],
    'extraction_job_output_free_floor_gib': [-1, 1048577],
    'extraction_job_output_free_resume_gib': [-1, 1048577],
    # a fraction of the shard's size (the job checks 0 to 1)
    'extraction_job_space_margin': [-0.1, 11, 1.5, 10],
    'extraction_job_restart_sec': [-1, 86401, 'inf'],
    'extraction_job_mode': ['offline', 'ONLINE', '', ['online']],
    'extraction_job_gateway_port': [0, 65536, -1, 'http', True, 30100.5],
    # the role writes <unit>@.service, as for the shard units
    'extraction_job_gateway_unit': ['two words', 'a/b', '', 'a@b', 'gateway.service', 'x\n'],
    'extraction_job_gateway_store_threads': [0, 257, 'many'],
    'extraction_job_gateway_max_prompts': [0, 65537],
    # a whole number of bytes from 16 MiB: never '512 MB' or a float
    'extraction_job_gateway_local_buffer_bytes': [(16 << 20) - 1, 0, -1, '512 MB', 536870912.5, True, (1 << 40) + 1],
    'extraction_job_gateway_stop_timeout': [0, -1, 86401, NAN],
    'extraction_job_gateway_server_wait': [0, -1, 86401, NAN, 'long'],
    'extraction_job_gateway_ready_timeout': [0, 86401, 'soon'],
    'extraction_job_chat_ignore_tokens': [['esc\x1bape'], ['<think>\r\n']],
    'mooncake_master_venv': ['relative/env', '/usr', '/root/a b'],
    'mooncake_master_python': ['python3'],
    'mooncake_master_package': ['--index-url=http://x', '-e .', 'a b'],
    'mooncake_master_system_packages': [['libibverbs1', '--force-yes'], ['Libnuma1'], [''], ['a\nb']],
    'ml_env_system_packages': [['-o', 'Dpkg::Options::=--force-all'], ['lib ibverbs1'], [None]],
    'mooncake_master_wheelhouse': ['wheels', '/tmp'],
    'mooncake_master_host': ['a b', 'x;y', 'host\n'],
    'mooncake_master_rpc_port': [0, 65536, -1],
    'mooncake_master_metadata_port': [0, 65536],
    'mooncake_master_metrics_port': [0, 70000],
    'mooncake_master_segment_port': [0, 65536],
    # a whole number of bytes, at least 64 MiB: never '4 GB' or a float
    'mooncake_master_segment_bytes': [(64 << 20) - 1, 0, -1, 100000000.5, '4 GB', True, 1 << 51],
    # at least 1000 ms (500 ms gave -707 LEASE_EXPIRED under load)
    'mooncake_master_kv_lease_ms': [500, 999, 0, -1],
    'mooncake_master_ready_timeout': [0, 3601],
    'monitoring_prometheus_host': ['a b', 'x;y', '-flag', 'ct3\n'],
    'monitoring_textfile_dir': ['relative/dir', '/var/lib', ''],
    'monitoring_config_dir': ['prometheus', '/etc'],
    'monitoring_node_exporter_port': [0, 65536],
    'monitoring_prometheus_port': [0, 70000],
    'monitoring_scrape_interval': [0, 301, 1.5e9],
    'monitoring_evaluation_interval': [0, 301],
    'monitoring_no_progress_seconds': [-1, 7 * 24 * 3600 + 1, float('inf')],
    'monitoring_server_down_seconds': [-1, True],
    'monitoring_shm_high_seconds': [-1],
    'monitoring_output_floor_seconds': [-1],
    'monitoring_metrics_stale_seconds': [-1, 10 ** 9],
    'monitoring_ready_timeout': [0, 3601],
    'online_training_job': ['a-b', '.hidden', 'a b', 'x' * 65],
    'online_training_mooncake_master': ['a b', 'x;y', '-flag'],
    'online_training_run_id': ['-run', 'a/b', 'a b', ''],
    'online_training_venv': ['relative/env', '/usr', ''],
    'online_training_requirements': [['torch'], ['torch>=2'], ['-e .'], ['a==1 ; b']],
    'online_training_wheelhouse': ['wheels', '/tmp'],
    'online_training_wheelhouse_src': ['wheels', '/'],
    'online_training_config_dir': ['etc', '/etc', ''],
    'online_training_control_root': ['var', '/var', ''],
    'online_training_output_dir': ['out', '/', ''],
    'online_training_target_model_path': ['models/m', '/'],
    'online_training_draft_config': ['draft.json', '/srv/draft.yaml', '/srv/draft'],
    'online_training_vocab_mapping_path': ['map.pt', '/'],
    'online_training_dataset': ['data.jsonl', '/'],
    'online_training_chat_template': ['a b', 'x' * 65, '../x/'],
    'online_training_max_length': [0, -1, 1 << 21],
    'online_training_num_epochs': [0, 100001],
    'online_training_max_steps': [-1, 1 << 41],
    'online_training_batch_size': [0, 4097],
    'online_training_learning_rate': [0, -1e-4, 1.5, float('nan')],
    'online_training_save_interval': [0, -1],
    'online_training_log_interval': [0, 1 << 21],
    'online_training_gpus': [['a'], ['0,1'], ['1000']],
    'online_training_producer_lease': [0, 4097],
    'online_training_segment_share': [0, 0.001, 1.5],
    'online_training_ready_timeout': [0, 86401],
}
# rule 1 for every string variable: a newline or another control character in it (the chat
# template's text may hold newlines and tabs, nothing else)
STRINGS = sorted(name for options in SPECS.values() for name, option in options.items() if option['type'] == 'str')
CASES = [(name, value) for name, values in BAD.items() for value in values] + \
    [(name, value) for name in STRINGS for value in ('two\nlines', 'esc\x1bape', 'cr\r')
     if not (name in TEMPLATE_TEXT and value == 'two\nlines')]


def test_every_rule_is_for_a_variable_of_a_role_spec():
    assert set(RULES) <= set(ROLE_OF)


def test_the_cases_cover_every_rule_and_are_many():
    assert set(RULES) <= set(BAD)
    assert len(CASES) >= 300


@pytest.mark.parametrize('name,value', CASES, ids=['%s=%r' % case for case in CASES])
def test_a_bad_value_is_refused_naming_the_variable(name, value):
    errors = role_value_errors(SPECS[ROLE_OF[name]], {name: value})
    assert errors, '%s=%r was accepted' % (name, value)
    assert name in errors[0]
    assert KEY not in '\n'.join(errors)       # the key is never shown


GOOD = {
    'proxmox_container_vmid': [100, 471, '471', 999999999],
    'proxmox_container_shm_size': ['64T', '64G', '512m', '50%', '1g', '256G'],
    'proxmox_container_rootfs_size': [0, 32],
    'proxmox_container_gpus': ['all', [0, 1], [7]],
    'proxmox_container_ostemplate': ['', 'local:vztmpl/debian-12-eagle3_amd64.tar'],
    'proxmox_container_raw_lxc': [['lxc.cgroup2.devices.allow: c 195:* rwm']],
    'proxmox_container_extra_devices': [['/dev/dri/renderD128,gid=104']],
    'gpu_check_driver_version': ['', '580.159.04', '535.104.05'],
    'ml_env_path': ['/root/ml-env', '/opt/eagle3/venv'],
    'ml_env_packages': [['sglang==0.5.23', 'torch>=2.4,<2.6', 'sglang[all]==0.5.14', 'pkg; python_version>"3.8"']],
    'sglang_server_tp_size': [1, 8, '8'],
    'sglang_server_vmid': [0, 471, '471'],
    'sglang_server_shm_min_free_gib': [0, 0.25, 8, '8'],
    'sglang_server_interconnect': ['nvlink', 'pcie'],
    'sglang_server_stale_shm_patterns': [['nccl-*', 'psm_*', 'sglang_hs_0']],
    'sglang_server_api_key': ['', KEY, 'key with inner spaces'],
    'extraction_job_api_key': ['', KEY],
    'sglang_server_flags': [{'mem-fraction-static': 0.88, 'disable-prefill-cuda-graph': True, 'cuda-graph-bs': [1, 2]},
                            {'mem-fraction-static': '0.8'}, {'mem-fraction-static': ''}],
    # a null value drops a default (the argument spec says so)
    'sglang_server_env': [{'NCCL_PROTO': 'LL', 'N': 16}, {'SGL_FORCE_SHUTDOWN': None}],
    'sglang_server_name': ['', 'kimi-k2.5', 'duo_1'],
    'sglang_server_node_rank': [0, 1, '3'],
    'sglang_server_socket_ifname': ['', 'eth0', 'eth0,eth1', '=ib0', '^docker,lo', 'enp65s0f0'],
    'sglang_server_dist_init_host': ['', '10.0.0.1', 'node-a.example', 'fd00::2'],
    'extraction_job_name': ['extraction', 'sharegpt_v2', 'sharegpt.v2', '_x'],
    'extraction_job_dataset': ['', os.path.abspath(__file__)],
    'extraction_job_space_margin': [0, 0.1, 1, '0.25'],
    'extraction_job_shard_count': [1, 3, '3'],
    'extraction_job_shard_indexes': [[0], [2, 0], ['1']],
    'extraction_job_server_url': ['http://127.0.0.1:30000', 'https://[::1]:8443/', 'http://node-a:30000'],
    'extraction_job_shm_high': [0.7],
    'extraction_job_mode': ['files', 'online'],
    'extraction_job_gateway_port': [1, 30100, '30100', 65535],
    'extraction_job_gateway_unit': ['eagle3-capture-gateway', 'gw_2'],
    'extraction_job_gateway_local_buffer_bytes': [16 << 20, '536870912', 1 << 40],
    # SpecForge's templates as they are: qwen, llama3 (its system prompt has blank lines), phi3
    'extraction_job_chat_assistant_header': ['<|im_start|>assistant\n',
                                             '<|start_header_id|>assistant<|end_header_id|>\n\n'],
    'extraction_job_chat_end_of_turn': ['<|im_end|>\n', '<|end|>\n', '<|eot_id|>'],
    'extraction_job_chat_system_prompt': ['You are helpful.\n\nIf a question makes no sense, say so.'],
    'extraction_job_chat_ignore_tokens': [['<think>\n\n</think>\n\n'], []],
    'extraction_job_accept_failed': [[], ['s00003', 'conv_17.b-2']],
    'extraction_job_metrics_dir': ['', '/var/lib/prometheus/node-exporter'],
    'mooncake_master_package': ['mooncake-transfer-engine-non-cuda==0.3.13.post1', 'mooncake-transfer-engine==0.3.13'],
    'mooncake_master_system_packages': [['libibverbs1', 'libnuma1', 'libcurl4'], []],
    'ml_env_system_packages': [['libibverbs1', 'libstdc++6', 'python3.11-venv'], []],
    'mooncake_master_host': ['', '10.0.0.5', 'master.example', 'fd00::5'],
    'mooncake_master_segment_bytes': [64 << 20, 32 << 30],
    'mooncake_master_kv_lease_ms': [1000, 10000],
    'online_training_job': ['sharegpt_v2', 'demo'],
    'online_training_mooncake_master': ['mc1', 'master.example'],
    'online_training_requirements': [[], ['specforge==0.2.0', 'torch==2.13.0+cpu']],
    'online_training_draft_config': ['/srv/draft/config.json'],
    'online_training_gpus': [[], ['0', '7']],
    'online_training_segment_share': [0.01, 0.5, 1],
    'monitoring_prometheus_host': ['', 'ct3', 'mon.example'],
    'monitoring_no_progress_seconds': [0, 60, 1800],
    'monitoring_scrape_interval': [1, 15],
}


@pytest.mark.parametrize('name,value', [(n, v) for n, vs in GOOD.items() for v in vs])
def test_a_good_value_passes(name, value):
    assert role_value_errors(SPECS[ROLE_OF[name]], {name: value}) == []


@pytest.mark.parametrize('role', ROLES)
def test_every_default_that_is_not_a_template_passes(role):
    with open('roles/%s/defaults/main.yml' % role) as f:
        defaults = yaml.safe_load(f)
    # the vmid's 0 stands for "set it per host" (cross_host_errors asks for it)
    plain = dict((k, v) for k, v in defaults.items() if not (isinstance(v, str) and '{{' in v)
                 and k != 'proxmox_container_vmid')
    assert role_value_errors(SPECS[role], plain) == []


@pytest.mark.parametrize('inventory', ['demo', 'example'])
def test_the_shipped_inventories_pass(inventory):
    with open('inventory/%s/group_vars/extraction_servers.yml' % inventory) as f:
        group = yaml.safe_load(f)
    plain = dict((k, v) for k, v in group.items() if '{{' not in repr(v))
    assert host_value_errors(SPECS, plain) == []


def host(node='pve1', vmid=471, **more):
    return dict({'proxmox_container_node': node, 'proxmox_container_vmid': vmid,
                 'sglang_server_model_path': '/srv/models/m'}, **more)


@pytest.mark.parametrize('vmids', [(471, '471'), (471, '0471'), ('471', '0471'), (471, 471)])
def test_vmids_are_compared_as_integers(vmids):
    errors = cross_host_errors({'ct1': host(vmid=vmids[0]), 'ct2': host(vmid=vmids[1])}, ['pve1'])
    assert len(errors) == 1 and 'ct1 and ct2 are all container 471 on pve1' in errors[0]


@pytest.mark.parametrize('node', [['pve1'], {'pve1': 1}])
def test_a_node_that_is_not_a_name_is_named_not_a_traceback(node):
    errors = cross_host_errors({'ct1': host(node=node)}, ['pve1'])
    assert len(errors) == 1 and errors[0].startswith('ct1: proxmox_container_node=') and 'not a host' in errors[0]


def test_the_same_vmid_on_two_nodes_is_fine():
    assert cross_host_errors({'ct1': host('pve1'), 'ct2': host('pve2')}, ['pve1', 'pve2']) == []


@pytest.mark.parametrize('values,expected', [
    (host(node='localhost'), "proxmox_container_node='localhost' is not a host of the proxmox_hypervisors"),
    (host(node=''), 'proxmox_container_node is not set'),
    ({'proxmox_container_node': 'pve1', 'sglang_server_model_path': '/m'}, 'proxmox_container_vmid is not set'),
    (host(sglang_server_model_path=''), 'sglang_server_model_path is not set'),
    ({'proxmox_container_node': 'pve1', 'proxmox_container_vmid': 471}, 'sglang_server_model_path is not set'),
    (host(sglang_server_tp_size=3, gpu_check_gpu_count=8), 'sglang_server_tp_size=3 does not divide '
                                                           'gpu_check_gpu_count=8'),
    (host(sglang_server_tp_size='16', gpu_check_gpu_count=8), 'sglang_server_tp_size=16 does not divide'),
])
def test_a_container_that_breaks_a_rule_across_hosts_is_named(values, expected):
    errors = cross_host_errors({'ct1': values}, ['pve1'])
    assert any(error.startswith('ct1: ') and expected in error for error in errors), errors


def test_tp_size_that_divides_the_gpus_passes():
    assert cross_host_errors({'ct1': host(sglang_server_tp_size=4, gpu_check_gpu_count=8)}, ['pve1']) == []


CORE_FLAGS = [('port', 'sglang_server_port'), ('host', 'sglang_server_host'), ('tp-size', 'sglang_server_tp_size'),
              ('model-path', 'sglang_server_model_path')]


@pytest.mark.parametrize('flag, variable', CORE_FLAGS)
def test_a_core_flag_in_the_flags_is_refused_naming_its_variable(flag, variable):
    # one way in: the config file and the address read the variable alone
    assert role_value_errors(SPECS['sglang_server'], {'sglang_server_flags': {'mem-fraction-static': 0.8, flag: 1}}) \
        == ["sglang_server_flags['%s'] is set; --%s is %s's: set that instead" % (flag, flag, variable)]


@pytest.mark.parametrize('flag, variable', CORE_FLAGS)
@pytest.mark.parametrize('typed', [['--{flag}', '1'], ['--{flag}=1'], ['--enable-metrics', '--{flag}', '1', '2']])
def test_a_core_flag_in_the_extra_args_is_refused_naming_its_variable(flag, variable, typed):
    args = [token.format(flag=flag) for token in typed]
    index = args.index(next(token for token in args if token.startswith('--' + flag)))
    assert role_value_errors(SPECS['sglang_server'], {'sglang_server_extra_args': args}) == [
        "sglang_server_extra_args[%d]=%r sets --%s; --%s is %s's: set that instead"
        % (index, args[index], flag, flag, variable)]


def test_port_with_two_values_is_refused_at_its_flag():
    # the address once read 9001 and the config file ["9001", "9002"]: now neither does
    assert role_value_errors(SPECS['sglang_server'], {'sglang_server_extra_args': ['--port', '9001', '9002']}) == [
        "sglang_server_extra_args[0]='--port' sets --port; --port is sglang_server_port's: set that instead"]


@pytest.mark.parametrize('serial,max_fail,reclaim,force,name', [
    ('abc', 100, True, False, 'extract_serial'),
    (-1, 100, True, False, 'extract_serial'),
    (0, 100, True, False, 'extract_serial'),
    ('150%', 100, True, False, 'extract_serial'),
    ('0%', 100, True, False, 'extract_serial'),
    ([], 100, True, False, 'extract_serial'),
    ([1, 'x'], 100, True, False, 'extract_serial'),
    (True, 100, True, False, 'extract_serial'),
    ('1\n', 100, True, False, 'extract_serial'),
    ('100%', 'abc', True, False, 'extract_max_fail_percentage'),
    ('100%', -1, True, False, 'extract_max_fail_percentage'),
    ('100%', '150%', True, False, 'extract_max_fail_percentage'),
    ('100%', 101, True, False, 'extract_max_fail_percentage'),
    ('100%', [], True, False, 'extract_max_fail_percentage'),
    ('100%', True, True, False, 'extract_max_fail_percentage'),
    ('100%', 100, 'maybe', False, 'extract_reclaim'),
    ('100%', 100, True, 'always', 'extract_force'),
])
def test_bad_rollout_values_are_refused(serial, max_fail, reclaim, force, name):
    errors = rollout_errors(serial, max_fail, reclaim, force)
    assert len(errors) == 1 and errors[0].startswith(name + '=')


@pytest.mark.parametrize('serial', ['100%', '50%', 1, '3', [1, '100%'], [1, 2, '50%']])
def test_good_rollout_values_pass(serial):
    assert rollout_errors(serial, '0', 'true', False) == []


@pytest.mark.parametrize('name', ['extraction_job_api_key', 'sglang_server_api_key'])
def test_an_api_key_given_as_a_number_is_refused_naming_the_variable_not_the_value(name):
    # before: extraction_job_api_key: 12345 passed the check and failed after the install ('_AnsibleTaggedInt'
    # has no len())
    errors = role_value_errors(SPECS[ROLE_OF[name]], {name: 982451653})
    assert errors == ['%s=(hidden) is not a string (int); give it as a string: quote it' % name]
    assert '982451653' not in errors[0]


@pytest.mark.parametrize('dataset', ['train.jsonl', 'data/train.jsonl', './train.jsonl', '~/train.jsonl'])
def test_a_relative_dataset_is_refused_whatever_file_the_working_dir_holds(dataset, tmp_path, monkeypatch):
    """The check read a relative dataset in the controller's working dir, the copy in Ansible's search path (the
    role's files/, the playbook's dir): with a file of that name in both, the host silently got the other one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'data').mkdir()
    for name in ('train.jsonl', 'data/train.jsonl'):
        (tmp_path / name).write_text('{}\n')
    errors = role_value_errors(SPECS['extraction_job'], {'extraction_job_dataset': dataset})
    assert errors == ["extraction_job_dataset=%r is not an absolute path; give an absolute path (a relative one is "
                      "looked up in two places: the check in the controller's working directory, the copy in "
                      "Ansible's search path)" % dataset]
    assert role_value_errors(SPECS['extraction_job'], {'extraction_job_dataset': str(tmp_path / 'train.jsonl')}) == []


@pytest.mark.parametrize('values,expected', [
    ({'extraction_job_shm_low': 0.8, 'extraction_job_shm_high': 0.7}, 'extraction_job_shm_low=0.8 is above'),
    # the other one's default counts (extraction_job_shm_high: 0.7)
    ({'extraction_job_shm_low': 0.8}, 'extraction_job_shm_low=0.8 is above extraction_job_shm_high=0.7'),
    ({'extraction_job_shm_high': 0.3}, 'extraction_job_shm_low=0.5 is above extraction_job_shm_high=0.3'),
    ({'extraction_job_output_free_floor_gib': 20}, 'extraction_job_output_free_floor_gib=20.0 is above'),
    ({'extraction_job_output_free_floor_gib': 8, 'extraction_job_output_free_resume_gib': '4'}, 'is above'),
    ({'extraction_job_shard_indexes': [0, 3], 'extraction_job_shard_count': 3}, 'holds 3, not below'),
    ({'extraction_job_shard_indexes': ['5'], 'extraction_job_shard_count': '2'}, "holds '5', not below"),
    ({'ml_env_wheelhouse_src': '/srv/wheels'}, 'ml_env_wheelhouse_src='),
    ({'mooncake_master_wheelhouse_src': '/srv/wheels'}, 'give mooncake_master_wheelhouse'),
    # the other ports' defaults count: 35880 is the metadata server's
    ({'mooncake_master_rpc_port': 35880},
     'mooncake_master_metadata_port=35880 is the same port as mooncake_master_rpc_port=35880'),
    ({'mooncake_master_segment_port': 35903}, 'mooncake_master_segment_port=35903 is the same port as '
                                              'mooncake_master_metrics_port=35903'),
    # the files mode reads the dataset from the controller: it must be a file there
    ({'extraction_job_dataset': '/nonexistent/eagle3.jsonl'}, "extraction_job_dataset='/nonexistent/eagle3.jsonl' is "
                                                              'not a file on the controller'),
    ({'extraction_job_dataset': '/nonexistent/eagle3.jsonl', 'extraction_job_mode': 'files'}, 'not a file'),
    # the role sees its dump dir resolved (the server's): output inside it is lost with the dumps
    ({'extraction_job_output_root': '/data/dumps/out', 'extraction_job_dump_dir': '/data/dumps'},
     "extraction_job_output_root='/data/dumps/out' is inside extraction_job_dump_dir='/data/dumps'"),
])
def test_a_rule_between_variables_is_named(values, expected):
    role = ROLE_OF[sorted(values)[0]]
    errors = role_value_errors(SPECS[role], values)
    assert len(errors) == 1 and expected in errors[0], errors


@pytest.mark.parametrize('values', [
    {'extraction_job_shm_low': 0.7, 'extraction_job_shm_high': 0.7},
    {'extraction_job_output_free_floor_gib': 12},
    {'extraction_job_shard_indexes': [0, 2], 'extraction_job_shard_count': 3},
    # the count's default is a template: the role checks it when it starts
    {'extraction_job_shard_indexes': [7]},
    {'ml_env_wheelhouse_src': '/srv/wheels', 'ml_env_wheelhouse': '/root/wheels'},
    {'mooncake_master_wheelhouse_src': '/srv/wheels', 'mooncake_master_wheelhouse': '/root/wheels'},
    {'mooncake_master_rpc_port': 35552, 'mooncake_master_segment_port': 35551},
    # the online mode reads no dataset (SpecForge's producer owns it): one left in the inventory is not looked at
    {'extraction_job_mode': 'online'},
    {'extraction_job_mode': 'online', 'extraction_job_dataset': '/nonexistent/eagle3.jsonl'},
])
def test_values_that_keep_the_rules_between_variables_pass(values):
    assert role_value_errors(SPECS[ROLE_OF[sorted(values)[0]]], values) == []


def test_inf_for_an_integer_is_one_named_error_among_the_others():
    errors = role_value_errors(SPECS['extraction_job'], {
        'extraction_job_concurrency': 'inf', 'extraction_job_max_attempts': '1e999', 'extraction_job_name': 'a-b',
        'extraction_job_drain_workers': 4})
    assert len(errors) == 3, errors
    assert [name for name in ('extraction_job_concurrency', 'extraction_job_max_attempts', 'extraction_job_name')
            if len([error for error in errors if name in error]) != 1] == [], errors
    assert "extraction_job_concurrency='inf'" in ' '.join(errors)


@pytest.mark.parametrize('values,expected', [
    ({'extraction_job_dump_dir': '/dev/shm/other'}, "extraction_job_dump_dir='/dev/shm/other' is not the server's "
                                                    "dump dir (sglang_server_dump_dir='/dev/shm/sglang_hs')"),
    ({'extraction_job_dump_dir': '/dev/shm/a', 'sglang_server_dump_dir': '/dev/shm/b'}, "is not the server's"),
    ({'sglang_server_dump_dir': '/dev/shm/b', 'extraction_job_dump_dir': '/dev/shm/b'}, None),
    # the job's default follows the server's
    ({'sglang_server_dump_dir': '/dev/shm/b'}, None),
])
def test_the_job_s_dump_dir_is_the_server_s(values, expected):
    errors = host_value_errors(SPECS, values)
    assert (errors == []) if expected is None else (len(errors) == 1 and expected in errors[0]), errors


def test_a_value_that_breaks_its_own_rule_is_not_compared_with_another():
    errors = role_value_errors(SPECS['extraction_job'], {'extraction_job_shm_low': 2, 'extraction_job_shm_high': 0.7})
    assert len(errors) == 1 and errors[0].startswith('extraction_job_shm_low=2 is out of range'), errors
