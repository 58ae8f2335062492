# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_patch's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import path
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'sglang_patch'
DEFAULTS_HEADER = ()

ENTRY_POINTS = (
    EntryPoint(
        'main', "Hook the hidden-state capture into sglang's deepseek_v2.py, or take it out",
        description=[
            (
                "Finds sglang's version and package directory with the venv's interpreter without importing sglang "
                '(C(importlib.metadata) and C(find_spec) of the top-level package), and refuses any version it '
                "ships no patch for, listing the supported ones (V(0.5.14), SpecForge's pin, and V(0.5.23))."),
            (
                'With O(sglang_patch_state=present) it installs the capture module as '
                'C(sglang/srt/eagle3_hs_capture.py) and inserts two small hooks into '
                'C(sglang/srt/models/deepseek_v2.py) (C(DeepseekV2ForCausalLM), which also serves DeepSeek-V3 and '
                'Kimi-K2). The capture does nothing unless the server runs with E(SGLANG_HS_DUMP_DIR) set.'),
            (
                "The file's sha256 tells its state. Already patched - no change. sglang's own file (a pip "
                'reinstall put it back) - patched again. Anything else - the role fails, says the file was edited, '
                'and changes nothing.'),
            (
                'The new file is checked against the known sha256 and compiled (C(py_compile)) before it replaces '
                'the old one; a backup is kept next to it. The diff is shown whenever the file is about to change, '
                'in check mode too.'),
            "With O(sglang_patch_state=absent) it puts sglang's own file back and removes the capture module.",
            'A server that is already running keeps the old code until it is restarted.',
        ]),
)

VARIABLES = (
    Variable(
        'sglang_patch_state', 'str', 'present',
        description="V(present) hooks the capture in; V(absent) restores sglang's own file.",
        choices=['present', 'absent'], same_on_every_node=True,
        comment="present: hook the hidden-state capture into sglang; absent: put sglang's own file back."),
    Variable(
        'sglang_patch_python', 'str', '',
        description=[
            (
                'The interpreter of the venv that has sglang. Empty takes the fact C(ml_env_python_bin) that the '
                "M(eagle3.extraction.ml_env) role sets, else the interpreter of that role's default venv (lookup "
                'C(eagle3.extraction.ml_env_python), V(/root/ml-env/bin/python)).'),
        ],
        rule=path(empty=True, what='an absolute path'), same_on_every_node=True,
        comment=(
            "The venv's interpreter; empty takes the ml_env role's fact ml_env_python_bin, else\n"
            "the interpreter of ml_env's default venv (lookup eagle3.extraction.ml_env_python).")),
    Variable(
        'sglang_patch_backup', 'bool', True,
        description='Keep a timestamped copy of C(deepseek_v2.py) next to it before each rewrite.',
        same_on_every_node=True,
        comment='Keep a timestamped copy of deepseek_v2.py next to it before each rewrite.'),
)
