# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: mooncake_master_plan
short_description: Where this host's Mooncake master is reached, and its units' command lines
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - The address the master and its segment holder on C(inventory_hostname) bind and advertise - C(mooncake_master_host),
    else the address the other hosts reach this host at (its C(ansible_host), else its name) - and what a Mooncake
    client is given of it, and the command lines of the master's and the segment holder's units, from the host's
    variables (a variable not set is the role's default).
  - The one owner of that rule is plugins/plugin_utils/mooncake_address.py; this lookup only hands the host's
    variables to it.
  - A container reached through its hypervisor without C(mooncake_master_host) fails, naming the variable.
options: {}
"""

EXAMPLES = r"""
- name: What the servers and trainers give Mooncake
  ansible.builtin.debug:
    msg: "{{ __mooncake.master_server_address }} {{ __mooncake.metadata_server }}"
  vars:
    __mooncake: "{{ lookup('eagle3.extraction.mooncake_master_plan') }}"
  # 10.0.0.5:35551 http://10.0.0.5:35880/metadata
"""

RETURN = r"""
_raw:
  description:
    - One element - C(host) (what is bound and advertised), C(master_server_address) (HOST:RPC_PORT),
      C(metadata_server) (http://HOST:METADATA_PORT/metadata), C(metrics_url) (http://HOST:METRICS_PORT), and the
      ports C(rpc_port), C(metadata_port), C(metrics_port), C(segment_port); C(master) and C(segment), the units'
      command lines (lists of words), and C(segment_environment), the holder's environment.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.eagle3.extraction.plugins.plugin_utils.mooncake_address import COMMAND_READ, READ, commands
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import AddressError


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms or kwargs:
            raise AnsibleLookupError('mooncake_master_plan takes no terms and no options (given: %s)'
                                     % ', '.join([repr(term) for term in terms] + sorted(kwargs)))
        variables = variables or {}
        values = dict((name, self._templar.template(variables[name])) for name in READ + COMMAND_READ
                      if name in variables)
        try:
            return [commands(variables.get('inventory_hostname', 'localhost'), values)]
        except AddressError as exc:
            raise AnsibleLookupError('mooncake_master: %s' % exc) from None
