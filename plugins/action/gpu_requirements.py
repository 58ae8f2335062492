# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_requirements: gpu_check's requirements over what gpu_facts read, on the controller (no host
contacted): fails once naming every GPU and figure that does not meet them
(plugin_utils/gpu_requirements.py); otherwise returns what the role publishes for later roles."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.plugin_utils.controller_check import ControllerCheck
from ansible_collections.eagle3.extraction.plugins.plugin_utils.gpu_requirements import gpu_problems


class ActionModule(ControllerCheck):
    ARGUMENT_SPEC = {
        'nvidia': {'type': 'dict', 'required': True},
        'driver_version': {'type': 'str', 'default': ''},
        'driver_version_min': {'type': 'str', 'default': ''},
        'gpu_count': {'type': 'int', 'default': 0},
        'gpu_model': {'type': 'str', 'default': ''},
        'persistence_mode': {'type': 'bool', 'default': True},
        'memory_used_max_mib': {'type': 'int', 'default': 0},
        'require_idle': {'type': 'bool', 'default': True},
        'reclaim': {'type': 'bool', 'default': False},
        'reclaimed': {'type': 'dict', 'default': {}},
        'hypervisor': {'type': 'str', 'default': ''},
        'hypervisor_result': {'type': 'dict', 'default': {}},
    }

    def check(self, args, task_vars, result):
        nvidia = args['nvidia']
        problems = gpu_problems(task_vars.get('inventory_hostname', '?'), nvidia, args)
        result.update(changed=False, problems=problems)
        if problems:
            result.update(failed=True, msg=' '.join(problems))
            return result
        result['msg'] = '%s: the GPUs meet every requirement' % nvidia.get('summary', '')
        # what the role publishes (set_fact: an action's ansible_facts are no variables with inject_facts_as_vars
        # false); "2 x NVIDIA H200" for reports (extract.yml's table)
        result.update(gpu_check_interconnect=nvidia.get('interconnect'), gpu_check_gpus=nvidia.get('gpus'),
                      gpu_check_summary=nvidia.get('summary'))
        return result
