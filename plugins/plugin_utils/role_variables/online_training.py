# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""online_training's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

SpecForge 0.2.0's producer and consumer (docs/online-training-specforge.md). Edit a variable here, then run
``python lab/tools/role_files.py --write``. The computed values (server URLs, Mooncake endpoints, watermarks)
come from the host's plan through the variables marked so in their descriptions.
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import each, number, path, pattern
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'online_training'
DEFAULTS_HEADER = ()

RUN_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,127}')
URL = re.compile(r'http://[A-Za-z0-9_.-]{1,253}(:[0-9]{1,5})?')
HOST_PORT = re.compile(r'[A-Za-z0-9_.-]{1,253}:[0-9]{1,5}')
DEVICE = re.compile(r'[0-9]{1,3}')
REQUIREMENT = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+')

ENTRY_POINTS = (
    EntryPoint(
        'main', "Run SpecForge 0.2.0's online producer and consumer as two systemd units",
        description=[
            ("Makes a venv at O(online_training_venv) with SpecForge 0.2.0 and the pinned closure of what its "
             'producer and consumer import (C(pip install --no-deps)), writes C(run.yaml) from the variables and '
             'runs C(specforge train --role producer) and C(--role consumer) as two units.'),
            ("Each attempt has fresh control and consumer-state dirs (SpecForge never resumes a producer); an "
             'open attempt goes on, the consumer resuming from its newest checkpoint; a finished run (SpecForge\'s '
             'C(refs.jsonl.consumer_done)) starts nothing unless O(online_training_restart).'),
        ]),
)

VARIABLES = (
    Variable('online_training_job', 'str', 'extraction',
             description=('The online job this host trains from: its servers are the extraction servers with '
                          'C(extraction_job_mode=online) and this C(extraction_job_name).'),
             rule=pattern(re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.]{0,63}'), "an extraction_job_name (letters, digits, "
                                                                          "_ and .)"),
             peer=True),
    Variable('online_training_mooncake_master', 'str', '',
             description=('The inventory name of the Mooncake master\'s host (a host of the group '
                          'C(mooncake_masters)). Required.'),
             rule=pattern(re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}'), 'an inventory host name', empty=True),
             peer=True),
    Variable('online_training_run_id', 'str', 'eagle3-online',
             description="SpecForge's C(run_id): names the checkpoints and the Mooncake namespace.",
             rule=pattern(RUN_ID, 'letters, digits, ".", "_" and "-", up to 128'),
             comment='The run and where its venv, config, attempts and checkpoints go.'),
    Variable('online_training_venv', 'str', '/opt/eagle3-online/venv',
             description='Absolute path of the venv SpecForge runs in.', rule=path()),
    Variable('online_training_requirements', 'list', [],
             description=[
                 ('Pinned requirement specs (C(name==version)) installed with C(--no-deps); empty installs the '
                  "role's C(files/requirements-cpu.txt), the CPU set the spike found (torch 2.13.0+cpu).")],
             elements='str', rule=each(pattern(REQUIREMENT, 'a pinned spec name==version'))),
    Variable('online_training_wheelhouse', 'str', '',
             description='A directory of wheels on the host: installs from it alone (C(--no-index --find-links)); '
                         'empty uses the package index.', rule=path(empty=True)),
    Variable('online_training_config_dir', 'str', '/etc/eagle3-online',
             description='Where C(run.yaml) is written.', rule=path()),
    Variable('online_training_control_root', 'str', '/var/lib/eagle3-online',
             description='Each run keeps its attempts here: C(<root>/<run_id>/attempt-NNNN/{control,consumer-state}).',
             rule=path()),
    Variable('online_training_output_dir', 'str', '/srv/eagle3-online/output',
             description="SpecForge's C(output_dir): checkpoints C(<run_id>-step<N>) and the units' logs.",
             rule=path()),
    Variable('online_training_target_model_path', 'str', required=True,
             description=('The target model dir: config.json, a tokenizer with a chat template, and '
                          'C(model.embed_tokens.weight) and C(lm_head.weight) in safetensors.'),
             rule=path(), group=True, comment='The models and the data.'),
    Variable('online_training_draft_config', 'str', required=True,
             description="The EAGLE-3 drafter's config.json (C(LlamaForCausalLMEagle3)); its hidden size the target's.",
             rule=path(suffixes=('.json',))),
    Variable('online_training_vocab_mapping_path', 'str', required=True,
             description="The d2t/t2d vocab mapping SpecForge's disaggregated eagle3 runs require (a torch file).",
             rule=path()),
    Variable('online_training_aux_layer_ids', 'list', [],
             description="The capture layers (C(model.aux_hidden_state_layer_ids)); empty: SpecForge's default. "
                         "From the host's plan: the servers' layers.",
             elements='int', rule=each(number(0, 4096))),
    Variable('online_training_dataset', 'str', required=True,
             description='The conversations (JSONL) the producer leases as prompts (C(data.train_data_path)).',
             rule=path()),
    Variable('online_training_eval_dataset', 'str', '',
             description='An eval set (C(data.eval_data_path)); empty: none.', rule=path(empty=True)),
    Variable('online_training_chat_template', 'str', 'qwen',
             description="SpecForge's chat template name (C(data.chat_template)).",
             rule=pattern(re.compile(r'[A-Za-z0-9._-]{1,64}'), 'a template name')),
    Variable('online_training_max_length', 'int', 2048, description='C(data.max_length), tokens.',
             rule=number(1, 1 << 20)),
    Variable('online_training_num_epochs', 'int', 1, description='C(training.num_epochs).',
             rule=number(1, 100000), group=True, comment='Training.'),
    Variable('online_training_max_steps', 'int', 0, description='C(training.max_steps); 0: as many as the epochs give.',
             rule=number(0, 1 << 40)),
    Variable('online_training_batch_size', 'int', 1, description='C(training.batch_size).', rule=number(1, 4096)),
    Variable('online_training_learning_rate', 'float', 0.0001, description='C(training.learning_rate).',
             rule=number(1e-12, 1.0)),
    Variable('online_training_save_interval', 'int', 1000, description='C(training.save_interval), optimizer steps.',
             rule=number(1, 1 << 40)),
    Variable('online_training_eval_interval', 'int', 0, description='C(training.eval_interval); 0: no eval.',
             rule=number(0, 1 << 40)),
    Variable('online_training_log_interval', 'int', 10,
             description='C(training.log_interval): how often the consumer prints its step line (status reads it).',
             rule=number(1, 1 << 20)),
    Variable('online_training_attention_backend', 'str', 'flex_attention', choices=('sdpa', 'flex_attention', 'fa'),
             description='C(training.attention_backend).'),
    Variable('online_training_gpus', 'list', [], elements='str',
             description=("The trainer's GPUs (C(CUDA_VISIBLE_DEVICES)); empty runs on the CPU, allowed only with "
                          "O(online_training_test_run) (SpecForge's trainer needs an accelerator)."),
             rule=each(pattern(DEVICE, 'a GPU index'))),
    Variable('online_training_test_run', 'bool', False,
             description='A test run: allows an empty O(online_training_gpus).'),
    Variable('online_training_restart', 'bool', False,
             description='Start a new attempt although the last one finished.'),
    Variable('online_training_server_urls', 'list', [], elements='str',
             description="The capture gateways' URLs (C(server_urls)); from the host's plan.",
             rule=each(pattern(URL, 'an http://host:port URL')), group=True,
             comment="From the host's plan (derived once there)."),
    Variable('online_training_mooncake_metadata_server', 'str', '',
             description="Mooncake's metadata URL, C(http://<master>:<port>/metadata); from the host's plan.",
             rule=pattern(re.compile(URL.pattern + '/metadata'), 'http://host:port/metadata', empty=True)),
    Variable('online_training_mooncake_local_hostname', 'str', '127.0.0.1',
             description="The address the peers reach this host at (C(MOONCAKE_LOCAL_HOSTNAME), "
                         "C(MC_TCP_BIND_ADDRESS)); from the host's plan.",
             rule=pattern(re.compile(r'[A-Za-z0-9_.:-]{1,253}'), 'a host name or address')),
    Variable('online_training_mooncake_protocol', 'str', 'tcp', choices=('tcp', 'rdma'),
             description="Mooncake's transport."),
    Variable('online_training_in_flight_high', 'int', 256,
             description="C(runtime.in_flight_high_watermark): samples in Mooncake before the producer pauses; "
                         "from the host's plan (sized to the segment).", rule=number(1, 1 << 30)),
    Variable('online_training_in_flight_low', 'int', 192,
             description='C(runtime.in_flight_low_watermark): where it goes on; at most the high one.',
             rule=number(0, 1 << 30)),
    Variable('online_training_producer_lease', 'int', 8,
             description='C(runtime.producer_lease): prompts a POST carries.', rule=number(1, 4096)),
)
