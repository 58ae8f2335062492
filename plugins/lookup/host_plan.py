# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: host_plan
short_description: This host's resolved plan, as the roles and playbooks read it
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - The plan of C(inventory_hostname) (plugins/plugin_utils/host_plan.py), the one owner of what the inventory decides
    for a host - what its server runs and where it is called, its layout, its dump dir, the venv's interpreter, the
    leftover patterns, the job's shards, dirs and server URL, the convergence stamp's path.
  - This host's variables as the caller sees them (role defaults, role and play variables, facts), the other extraction
    servers' as their C(hostvars) have them (what a multi-node server's other nodes decide). extract.yml's
    C(inventory_check) makes every host's plan with the same code, from the inventory alone.
  - A public variable whose default is the plan's own value (the job's shards, shard count, server URL and dump dir)
    is the plan's to compute while it holds that default.
  - A value no plan can be made of fails, naming the host, the variable and its value.
options: {}
"""

EXAMPLES = r"""
- name: The URL this host's clients call its server at, and the job's shards
  ansible.builtin.debug:
    msg: "{{ __plan.server.url }} {{ __plan.job.shards }}"
  vars:
    __plan: "{{ lookup('eagle3.extraction.host_plan') }}"
  # http://127.0.0.1:30000 [1]
"""

RETURN = r"""
_raw:
  description:
    - One element, the plan - C(server) (C(layout), C(multinode), C(address), C(url), C(flags), C(tp_size),
      C(local_tp), C(environment), C(unit), C(dump_dir), C(leftover_patterns)), C(python), C(job) (C(name),
      C(shards), C(shard_count), C(dir), C(output_dirs), C(server_url), C(dump_dir), C(metrics_dir)), C(online),
      C(monitoring) and C(stamp).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import PlanError, task_plan


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms or kwargs:
            raise AnsibleLookupError('host_plan takes no terms and no options (given: %s)'
                                     % ', '.join([repr(term) for term in terms] + sorted(kwargs)))
        try:
            return [task_plan(variables or {}, self._templar.template)]
        except PlanError as exc:
            raise AnsibleLookupError(str(exc)) from None
