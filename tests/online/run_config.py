# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online_training role's run.yaml as its template makes it, outside Ansible: the role's defaults, the
variables given, and what the role's tasks hand the template (the host plan's online section, the attempt's dirs,
the watermarks). Used by the template's test and by the GPU proof (lab/gpu/online_real_engine.py), so that both
run the config the role writes, not a copy of it."""
import json
import os

import jinja2
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "online_training")


def render_run_yaml(plan, run_root, window, attempt, **variables):
    """run.yaml's text. ``plan``: the host plan's online section (aux_layer_ids, server_urls, master,
    environment); ``window``: {high, low}; ``attempt``: {control_dir, consumer_state_dir, draft_checkpoint,
    resume_from}; ``variables``: online_training_* values over the role's defaults."""
    with open(os.path.join(ROLE, "defaults", "main.yml"), encoding="utf-8") as stream:
        values = yaml.safe_load(stream)
    values.update(variables, ansible_managed="Ansible managed", __online_training_plan=plan,
                  __online_training_run_root=run_root, __online_training_window=window,
                  __online_training_attempt=dict({"draft_checkpoint": "", "resume_from": ""}, **attempt))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters.update(to_json=json.dumps, comment=lambda text: "# " + text)
    return env.get_template("run.yaml.j2").render(**values)
