# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The options of the modules that read or decide a SpecForge online run's attempts, online_training_attempt and
    online_training_status (their argument spec and check: module_utils/specforge_attempt.py RUN_ARGUMENT_SPEC,
    run_input_error)."""

    DOCUMENTATION = r'''
options:
  control_root:
    description: Absolute path under which each run keeps its attempts; not C(/).
    type: path
    required: true
  run_id:
    description: SpecForge's C(run_id); a name of letters, digits, C(.), C(_), C(-).
    type: str
    required: true
  output_dir:
    description: SpecForge's C(output_dir), where the consumer writes its checkpoints (and the reader its progress).
    type: path
    required: true
'''
