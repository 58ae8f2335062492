# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""online_training's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

SpecForge 0.2.0's producer and consumer (docs/online-training-specforge.md). Edit a variable here, then run
``python lab/tools/role_files.py --write``. The computed values (server URLs, Mooncake endpoints and
environment, capture layers) are the host plan's ``online`` section (plugin_utils/host_plan.py), never
variables of this role; the in-flight watermarks are derived from the segment's size and the longest prompt
(plugin_utils/online_training.py).
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import each, number, path, pattern
from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_variables.extraction_job import JOB_NAME
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'online_training'
DEFAULTS_HEADER = ()

RUN_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,127}')
# an inventory host name (Ansible's own: no spaces, no control characters; kept to DNS-like names here)
INVENTORY_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}')
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
    EntryPoint(
        'stop', ('Stop the consumer, then the producer (the producer writes its failure marker: the next run '
                 "starts a new attempt from the consumer's newest checkpoint)"),
        options={}),
    EntryPoint(
        'status', ("Read the newest attempt's state, step, loss, samples/s and the refs published and consumed "
                   'into the fact C(online_training_status)'),
        options={'online_training_control_root': {}, 'online_training_run_id': {}, 'online_training_output_dir': {},
                 'online_training_consumer': {}}),
)

VARIABLES = (
    Variable('online_training_job', 'str', '',
             description=("The extraction job whose servers this host trains from (their C(extraction_job_name), "
                          "with C(extraction_job_mode=online)); the host's plan gives its gateways' URLs and capture "
                          'layers.'),
             rule=pattern(JOB_NAME, 'a job name: letters, digits, _ and .', empty=True), plan=True, peer=True,
             needed='the name of the online extraction job it trains from',
             comment="What it trains from: the plan's online section derives every URL and Mooncake setting of them."),
    Variable('online_training_mooncake_master', 'str', '',
             description=('The inventory name of the Mooncake master host (a host of the C(mooncake_masters) '
                          'group) whose store holds the features.'),
             rule=pattern(INVENTORY_NAME, 'an inventory host name', empty=True), plan=True, peer=True,
             needed='the inventory name of a host of the mooncake_masters group'),
    Variable('online_training_consumer', 'str', 'specforge', choices=('specforge', 'reader'),
             description=[
                 ("What consumes the features: V(specforge) is SpecForge's trainer "
                  '(C(specforge train --role consumer)), for a host with GPUs; V(reader) is this collection\'s '
                  'reader (C(eagle3_online_reader)), made of SpecForge\'s consumer-side API, which reads every '
                  'sample once, records its features\' digests under O(online_training_output_dir) and trains '
                  'nothing (a CPU host, a test).')]),
    Variable('online_training_run_id', 'str', 'eagle3-online',
             description="SpecForge's C(run_id): names the checkpoints and the Mooncake namespace.",
             rule=pattern(RUN_ID, 'letters, digits, ".", "_" and "-", up to 128'), group=True,
             comment='The run and where its venv, config, attempts and checkpoints go.'),
    Variable('online_training_venv', 'str', '/opt/eagle3-online/venv',
             description='Absolute path of the venv SpecForge runs in.', rule=path()),
    Variable('online_training_requirements', 'list', [],
             description=[
                 ('Pinned requirement specs (C(name==version)) installed with C(--no-deps); empty installs the '
                  "role's C(files/requirements-cpu.txt), the CPU set the spike found (torch 2.13.0+cpu; the "
                  "README says what a GPU trainer adds).")],
             elements='str', rule=each(pattern(REQUIREMENT, 'a pinned spec name==version'))),
    Variable('online_training_wheelhouse', 'str', '',
             description='A directory of wheels on the host: installs from it alone (C(--no-index --find-links)); '
                         "empty uses the package index (ml_env's O(ml_env_wheelhouse)).",
             rule=path(empty=True)),
    Variable('online_training_wheelhouse_src', 'str', '',
             description=('A directory of wheels on the controller copied to O(online_training_wheelhouse) first '
                          "(ml_env's O(ml_env_wheelhouse_src)); empty copies nothing."),
             rule=path(empty=True)),
    Variable('online_training_config_dir', 'str', '/etc/eagle3-online',
             description='Where C(run.yaml) is written.', rule=path()),
    Variable('online_training_control_root', 'str', '/var/lib/eagle3-online',
             description='Each run keeps its attempts here: C(<root>/<run_id>/attempt-NNNN/{control,consumer-state}).',
             rule=path()),
    Variable('online_training_output_dir', 'str', '/srv/eagle3-online/output',
             description="SpecForge's C(output_dir): checkpoints C(<run_id>-step<N>) and the units' logs.",
             rule=path()),
    Variable('online_training_target_model_path', 'str', '',
             description=('The target model dir: config.json, a tokenizer with a chat template, and '
                          'C(model.embed_tokens.weight) and C(lm_head.weight) in safetensors.'),
             rule=path(empty=True), needed='the absolute path of the target model dir', group=True, comment='The models and the data.'),
    Variable('online_training_draft_config', 'str', '',
             description="The EAGLE-3 drafter's config.json (C(LlamaForCausalLMEagle3)); its hidden size the target's.",
             rule=path(empty=True, suffixes=('.json',)), needed="the absolute path of the drafter's config.json"),
    Variable('online_training_vocab_mapping_path', 'str', '',
             description="The d2t/t2d vocab mapping SpecForge's disaggregated eagle3 runs require (a torch file).",
             rule=path(empty=True), needed='the absolute path of the d2t/t2d vocab mapping'),
    Variable('online_training_dataset', 'str', '',
             description='The conversations (JSONL) the producer leases as prompts (C(data.train_data_path)).',
             rule=path(empty=True), needed='the absolute path of the conversations (JSONL)'),
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
    Variable('online_training_log_interval', 'int', 10,
             description='C(training.log_interval): how often the consumer prints its step line (status reads it).',
             rule=number(1, 1 << 20)),
    Variable('online_training_attention_backend', 'str', 'flex_attention', choices=('sdpa', 'flex_attention', 'fa'),
             description='C(training.attention_backend).'),
    Variable('online_training_gpus', 'list', [], elements='str',
             description=("The trainer's GPUs (C(CUDA_VISIBLE_DEVICES)); empty runs on the CPU, allowed only with "
                          "O(online_training_test_run) (SpecForge's trainer needs an accelerator). On a host that "
                          "also runs an SGLang server, none of the server's GPUs (refused: the server's restarts "
                          "beside the trainer would fail)."),
             rule=each(pattern(DEVICE, 'a GPU index'))),
    Variable('online_training_test_run', 'bool', False,
             description='A test run: allows an empty O(online_training_gpus).'),
    Variable('online_training_restart', 'bool', False,
             description='Start a new attempt although the last one finished.'),
    Variable('online_training_producer_lease', 'int', 8,
             description='C(runtime.producer_lease): prompts a POST carries.', rule=number(1, 4096), group=True,
             comment='The stream between the producer and the consumer.'),
    Variable('online_training_segment_share', 'float', 0.5,
             description=("The share of the master's segment this run's samples in flight may fill: the producer's "
                          'C(runtime.in_flight_high_watermark) is that many bytes over the largest sample '
                          '(O(online_training_max_length) tokens of the capture layers and the last hidden state); '
                          'the low one three quarters of it.'),
             rule=number(0.01, 1.0)),
    Variable('online_training_ready_timeout', 'int', 300,
             description=("Seconds to wait for the Mooncake master's metrics and every server URL's C(/health) "
                          'before the units start.'),
             rule=number(1, 86400)),
)
