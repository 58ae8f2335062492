# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter sglang_server_layout: one host's place in its SGLang server (plugin_utils/server_layout.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_layout import NAME, RANK, layout

READ = (NAME, RANK, 'sglang_server_dist_init_port', 'sglang_server_dist_init_host', 'ansible_host', 'ansible_connection')


def sglang_server_layout(hosts, hostvars, host):
    """hosts: the extraction servers; hostvars: the play's hostvars; host: the one asked about."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError('sglang_server_layout: the input must be the list of extraction servers')
    values = {}
    for name in list(hosts) + ([] if host in hosts else [host]):
        found = hostvars[name]
        values[name] = dict((key, found[key]) for key in READ if key in found)
    if host not in hosts:
        values = {host: values[host]}
    return layout(values, host)


class FilterModule(object):
    def filters(self):
        return {'sglang_server_layout': sglang_server_layout}
