# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online_training role's run.yaml, rendered from its template with the role's defaults and with every setting
a user may change, is a config SpecForge 0.2.0 itself accepts (its own ``load_config``): a variable the role takes
but SpecForge refuses would fail only once the producer starts, after the install and the units."""
import os
import re

import pytest
from specforge.config import load_config

from run_config import ROLE, render_run_yaml

# what the role's tasks hand the template besides its variables (the host plan's online section, the attempt
# module's dirs, the window filter's watermarks)
PLAN = {"aux_layer_ids": [1, 29, 57], "server_urls": ["http://10.0.0.1:30100", "http://10.0.0.2:30100"],
        "master": {"metadata_server": "http://10.0.0.3:35880/metadata", "master_server_address": "10.0.0.3:35551"},
        "environment": {"MOONCAKE_PROTOCOL": "tcp"}}


def render(tmp_path, attempt=None, **overrides):
    variables = dict(
        online_training_target_model_path="/models/target", online_training_draft_config="/models/draft.json",
        online_training_vocab_mapping_path="/models/vocab_mapping.pt", online_training_dataset="/data/train.jsonl")
    variables.update(overrides)
    path = tmp_path / "run.yaml"
    path.write_text(render_run_yaml(
        PLAN, "/var/lib/eagle3-online/eagle3-online", {"high": 16, "low": 12},
        dict({"control_dir": "/var/lib/eagle3-online/eagle3-online/attempt-0001/control",
              "consumer_state_dir": "/var/lib/eagle3-online/eagle3-online/attempt-0001/state"}, **(attempt or {})),
        **variables))
    return load_config(str(path))


def test_the_defaults_make_a_config_specforge_accepts(tmp_path):
    cfg = render(tmp_path)
    assert cfg.deployment.disaggregated.server_urls == PLAN["server_urls"]
    assert cfg.runtime.in_flight_high_watermark == 16 and cfg.runtime.in_flight_low_watermark == 12
    assert cfg.training.eval_interval == 0 and not cfg.data.eval_data_path


# a value other than the default of every variable the template places (the paths are set by render())
CHANGED = {"online_training_num_epochs": 3, "online_training_max_steps": 500, "online_training_batch_size": 4,
           "online_training_learning_rate": 5e-5, "online_training_save_interval": 100,
           "online_training_log_interval": 1, "online_training_attention_backend": "sdpa",
           "online_training_max_length": 4096, "online_training_chat_template": "llama3",
           "online_training_producer_lease": 2, "online_training_gpus": [0, 1],
           "online_training_run_id": "kimi-drafter", "online_training_output_dir": "/srv/drafter"}
SET_BY_RENDER = {"online_training_target_model_path", "online_training_draft_config",
                 "online_training_vocab_mapping_path", "online_training_dataset"}


def test_every_variable_the_template_places_has_a_changed_value_here():
    # a variable added to the template is tried here too (an eval set SpecForge refuses in its online mode was
    # one: data.eval_data_path, training.eval_interval without an offline eval source)
    with open(os.path.join(ROLE, "templates", "run.yaml.j2"), encoding="utf-8") as stream:
        placed = set(re.findall(r"\b(online_training_[a-z_]+)", stream.read()))
    assert placed - SET_BY_RENDER == set(CHANGED)


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_every_setting_a_user_may_change_makes_a_config_specforge_accepts(tmp_path, name):
    render(tmp_path, **{name: CHANGED[name]})


@pytest.mark.parametrize("attempt", [{"draft_checkpoint": "/out/eagle3-online-step100"},
                                     {"resume_from": "/out/eagle3-online-step100"}])
def test_a_later_attempt_or_a_resume_makes_a_config_specforge_accepts(tmp_path, attempt):
    render(tmp_path, attempt)
