# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter sglang_server_address: where one host's SGLang server listens and the URLs that call it
(plugin_utils/server_address.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.sglang_server_layout import READ as LAYOUT_READ
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_address import READ, AddressError, address


def sglang_server_address(hosts, hostvars, host, values=None):
    """hosts: the extraction servers; hostvars: the play's hostvars; host: the one asked about;
    values: that host's variables as the caller sees them (a role's defaults and parameters), over its hostvars."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError('sglang_server_address: the input must be the list of extraction servers')
    if values is not None and not isinstance(values, dict):
        raise AnsibleFilterError('sglang_server_address: values must be a dict of the host\'s variables')
    found = {}
    for name in list(hosts) + ([] if host in hosts else [host]):
        seen = hostvars[name]
        found[name] = dict((key, seen[key]) for key in READ + LAYOUT_READ if key in seen)
    if host not in hosts:
        found = {host: found[host]}
    found[host].update(values or {})
    try:
        return address(found, host)
    except AddressError as exc:
        raise AnsibleFilterError('%s: %s' % (host, exc)) from None


class FilterModule(object):
    def filters(self):
        return {'sglang_server_address': sglang_server_address}
