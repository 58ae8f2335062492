# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which containers make one SGLang server, from the inventory.

A container belongs to the server its ``sglang_server_name`` names; its
``sglang_server_node_rank`` is its ``--node-rank`` (0 to N-1; rank 0 serves HTTP and its address
and ``sglang_server_dist_init_port`` make ``--dist-init-addr``). A container without
``sglang_server_name`` is a one-node server named after itself, as before multi-node servers.

``layout`` answers for one host (the role and extract.yml use it through the filter
``sglang_server_layout``); ``layout_errors`` is what inventory_check refuses before any host is
touched. Both read ``{host: {variable: value}}`` with only the values the inventory sets.
"""

from __future__ import annotations


from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_int, show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import through_pct
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import (
    AddressError, bind, host_port, http_port, loopback)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variables import SAME_ON_EVERY_NODE, SECRETS

NAME = 'sglang_server_name'
RANK = 'sglang_server_node_rank'
DIST_INIT_PORT = 'sglang_server_dist_init_port'
NOT_SET = object()


def _rank(value):
    return inventory_int(value, 4)


def _dist_init_port(values):
    """--dist-init-addr's port as rank 0's values give it (the role's default when not set)."""
    if DIST_INIT_PORT in values:
        return _rank(values[DIST_INIT_PORT])
    return _rank(spec_defaults('sglang_server', (DIST_INIT_PORT,))[DIST_INIT_PORT])


def server_name(host, values):
    name = values.get(NAME)
    return name if isinstance(name, str) and name else host


def servers(hosts):
    """{server name: [hosts]} in inventory order."""
    found = {}
    for host, values in hosts.items():
        found.setdefault(server_name(host, values), []).append(host)
    return found


def _address(host, values):
    """The container's own address as the inventory has it; None for one reached through pct, whose
    ansible_host is its hypervisor's."""
    if through_pct(values):
        return None
    return values.get('ansible_host') or host


def layout(hosts, host):
    """One host's place: its server, the nodes in rank order, its rank, and rank 0's addresses.

    A host that ``hosts`` lacks (a play outside extract.yml) is a one-node server of its own.
    """
    values = hosts.get(host, {})
    if host not in hosts:
        hosts = {host: values}
    name = server_name(host, values)
    members = [h for h in hosts if server_name(h, hosts[h]) == name]
    nodes = sorted(members, key=lambda h: (_rank(hosts[h].get(RANK, 0)) or 0, h))
    rank0 = nodes[0]
    port = _dist_init_port(hosts[rank0])
    # rank 0 reached through pct has no address here: server_address refuses it without sglang_server_dist_init_host
    dist_host = hosts[rank0].get('sglang_server_dist_init_host') or _address(rank0, hosts[rank0])
    return {
        'name': name,
        'nodes': nodes,
        'nnodes': len(nodes),
        'rank': nodes.index(host),
        'rank0': rank0,
        'rank0_address': _address(rank0, hosts[rank0]),
        # every server of the inventory, sorted: the extraction job's shards are one per server
        'servers': sorted(servers(hosts)),
        'dist_init_addr': host_port(dist_host, port)
        if len(nodes) > 1 and dist_host else '',
    }


def _gpu_count(values):
    count = _rank(values.get('gpu_check_gpu_count'))
    if count:
        return count
    gpus = values.get('proxmox_container_gpus')
    return len(gpus) if isinstance(gpus, (list, tuple)) and gpus else None


def _compared(values):
    # what every node of one server must agree on (their records say so): the same SGLang, the same patch, the
    # same model and flags (the inventory's values; a value set on one node and not on another differs too)
    return dict((k, v) for k, v in values.items() if k in SAME_ON_EVERY_NODE)


def _differences(name, nodes, hosts):
    errors = []
    keys = sorted(set(k for h in nodes for k in _compared(hosts[h])))
    for key in keys:
        seen = [(h, hosts[h].get(key, NOT_SET)) for h in nodes]
        if any(value != seen[0][1] for dummy, value in seen[1:]):
            shown = ', '.join('%s: %s' % (h, '(not set)' if value is NOT_SET else '(hidden)' if key in SECRETS
                                          else show(value)) for h, value in seen)
            errors.append('server %s: its nodes differ in %s (%s); every node of a server runs the same SGLang, '
                          'patch, model and flags' % (name, key, shown))
    return errors


def _rank_errors(name, nodes, hosts):
    """The ranks of one server's nodes cover 0 to N-1 once each."""
    errors, ranks = [], {}
    for host in nodes:
        if RANK not in hosts[host]:
            if len(nodes) > 1:
                errors.append('%s: sglang_server_node_rank is not set; server %s has %d nodes (%s): give each its '
                              'rank, 0 to %d' % (host, name, len(nodes), ', '.join(nodes), len(nodes) - 1))
            continue
        rank = _rank(hosts[host][RANK])
        if rank is None:
            errors.append('%s: sglang_server_node_rank=%s is not an integer' % (host, show(hosts[host][RANK])))
            continue
        ranks.setdefault(rank, []).append(host)
    if errors or not ranks:
        return errors
    if sorted(ranks) != list(range(len(nodes))) or any(len(same) > 1 for same in ranks.values()):
        shown = ', '.join('%s=%d' % (h, r) for r in sorted(ranks) for h in ranks[r])
        errors.append('server %s: the node ranks (%s) do not cover 0 to %d once each; give its %d node%s the ranks '
                      '0 to %d' % (name, shown, len(nodes) - 1, len(nodes), 's' if len(nodes) > 1 else '',
                                   len(nodes) - 1))
    return errors


def _rank0_loopback_errors(name, rank0, values):
    """Rank 0 must listen where the other nodes reach it: the host it binds."""
    try:
        variable, host = bind(values)
    except AddressError:
        return []   # inventory_check names it with the addresses
    if not loopback(host):
        return []
    return ['server %s: rank 0 (%s) listens on %s=%s%s; the other nodes wait on its /health: give an address they '
            'reach (0.0.0.0)' % (name, rank0, variable, host, '' if variable in values else ' (the default)')]


def _dist_init_port_errors(name, rank0, values):
    """--dist-init-addr's port is rank 0's own: it cannot be the port rank 0 serves HTTP on."""
    try:
        variable, port = http_port(values)
    except AddressError:
        return []   # inventory_check names it with the addresses
    dist = _dist_init_port(values)
    if dist != port:
        return []
    return ['server %s: rank 0 (%s) has sglang_server_dist_init_port=%d%s, the port it serves HTTP on (%s=%d); the '
            'nodes meet on another port: give sglang_server_dist_init_port a free one'
            % (name, rank0, dist, '' if 'sglang_server_dist_init_port' in values else ' (the default)', variable,
               port)]


def layout_errors(hosts, serial='100%'):
    """What cannot work, as messages naming the server, its hosts and the values."""
    errors = []
    # a host without sglang_server_name is the server of its name: a named server may not take it
    taken = {}
    for host, values in hosts.items():
        name = values.get(NAME)
        if isinstance(name, str) and name in hosts and name != host and hosts[name].get(NAME) != name:
            taken.setdefault(name, []).append(host)
    for name, named in sorted(taken.items()):
        errors.append('server %s (sglang_server_name of %s) has the name of the host %s, which is not one of '
                      'its nodes; give the server another name' % (name, ', '.join(named), name))
    for name, nodes in sorted(servers(hosts).items()):
        if name in taken:
            continue
        errors.extend(_rank_errors(name, nodes, hosts))
        if len(nodes) < 2:
            continue
        errors.extend(_differences(name, nodes, hosts))
        tps = set(_rank(hosts[h].get('sglang_server_tp_size')) for h in nodes)
        if None in tps:
            errors.append('server %s: set sglang_server_tp_size on its nodes (%s) to the sum of their GPUs; the '
                          'default is one node\'s GPUs' % (name, ', '.join(nodes)))
        counts = [(h, _gpu_count(hosts[h])) for h in nodes]
        if len(tps) == 1 and None not in tps and all(count for dummy, count in counts):
            tp = tps.pop()
            total = sum(count for dummy, count in counts)
            if tp != total or len(set(count for dummy, count in counts)) > 1:
                errors.append('server %s: sglang_server_tp_size=%d must be the sum of its nodes\' GPUs, the same '
                              'number on each (%s: %d in all)'
                              % (name, tp, ', '.join('%s %d' % pair for pair in counts), total))
        rank0 = layout(hosts, nodes[0])['rank0']
        errors.extend(_rank0_loopback_errors(name, rank0, hosts[rank0]))
        errors.extend(_dist_init_port_errors(name, rank0, hosts[rank0]))
        if serial != '100%' and list(serial if isinstance(serial, (list, tuple)) else [serial]) != ['100%']:
            errors.append('server %s spans %s: its nodes start together, so extract_serial=%s must be "100%%"'
                          % (name, ', '.join(nodes), show(serial)))
    return errors
