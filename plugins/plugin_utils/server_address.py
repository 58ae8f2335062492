# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where an SGLang server is called: the one owner of that fact.

The port and bind host are ``sglang_server_port`` and ``sglang_server_host`` (plugin_utils/server_listen.py:
no flag or extra argument sets them). From them, ``address`` gives the URL a client on the host calls
(loopback for a wildcard bind: ``[::1]`` for ``::``; on a node of rank > 0, rank 0's URL) and the URL the
controller calls (the container's ``ansible_host``, or the bind host when it is a real address). The
sglang_server role, the extraction job's default, the rollout table, stop and the convergence cache read
it; none derives it again.

A container reached through its hypervisor (plugin_utils/pct_connection.py) has no address of its
own in the inventory: its ``ansible_host`` is the node's. Its server has no controller URL unless
it binds a real address, and a multi-node server whose rank 0 is one needs
``sglang_server_dist_init_host``, which its other nodes then call too.
"""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import PCT_CONNECTION, through_pct
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_layout import layout
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import (
    HOST_NAME, READ as LISTEN_READ, WILDCARD, AddressError, bind, http_port, http_url, ip, loopback)

# what the address is made of
READ = LISTEN_READ + ('ansible_host', 'ansible_connection', 'proxmox_container_node')
# what a client on the host calls for a wildcard bind: SGLang's uvicorn binds :: as an IPv6-only
# socket (asyncio's create_server sets IPV6_V6ONLY), where 127.0.0.1 is refused; '' is both families
LOCAL = {'0.0.0.0': '127.0.0.1', '': '127.0.0.1', '::': '::1'}


def exposure_warning(address, api_key):
    """The warning for a server that listens beyond its own container (``address``: address()'s) while
    sglang_server_api_key is empty, or None: anyone who reaches the port can use it."""
    if loopback(address['host']) or api_key:
        return None
    return ('the server listens on %s (sglang_server_host), beyond localhost, and '
            'sglang_server_api_key is empty: anyone who reaches port %d can use the server. Set sglang_server_api_key '
            '(in Ansible Vault).' % (address['host'] or "'' (every address)", address['port']))


def ansible_host_error(name, values):
    """Why the ansible_host of host ``name`` (else its name) is not an address or host name ('a;b', a newline),
    else None. reached_at asks it of the host it reads; the inventory check and each role's first check of every
    host whose ansible_host is set, whatever its connection (a pct container's is its node's address)."""
    found = values.get('ansible_host') or name
    if not isinstance(found, str) or not (ip(found) or HOST_NAME.fullmatch(found)):
        return 'ansible_host=%s of %s is not an address or host name' % (show(found), name)
    return None


def reached_at(name, values):
    """The address the controller and the other hosts reach host ``name`` at: its ansible_host, else its
    name. None for a container reached through pct: its ansible_host is its hypervisor's. Also the
    default of the address Mooncake's master advertises (plugin_utils/mooncake_address.py)."""
    if through_pct(values):
        return None
    error = ansible_host_error(name, values)
    if error:
        raise AddressError(error)
    return values.get('ansible_host') or name


def _controller_host(name, values, bind_host):
    """The bind host when it is a real address, else where the host is reached (reached_at): a
    wildcard or loopback bind is not an address the controller can call."""
    if bind_host not in WILDCARD and not loopback(bind_host):
        return bind_host
    return reached_at(name, values)


def _own(name, values):
    dummy, port = http_port(values)
    dummy, bind_host = bind(values)
    controller_host = _controller_host(name, values, bind_host)
    controller = http_url(controller_host, port) if controller_host else None
    local = http_url(LOCAL.get(bind_host, bind_host), port)
    return port, bind_host, local, controller


def _rank0_urls(where, hosts):
    """Rank 0's URLs as the other nodes of a multi-node server have them: (what they call, what the
    controller calls). They call rank 0's controller URL, or, when rank 0 is reached through pct, its
    sglang_server_dist_init_host (the address they reach it at)."""
    rank0 = where['rank0']
    values = hosts[rank0]
    try:
        port, dummy, dummy, controller = _own(rank0, values)
    except AddressError as exc:
        raise AddressError('rank 0 (%s) of server %s: %s' % (rank0, where['name'], exc)) from None
    if not through_pct(values):
        return controller, controller
    given = values.get('sglang_server_dist_init_host')
    if not given:
        raise AddressError('rank 0 (%s) of server %s is reached through its hypervisor (ansible_connection=%s), so '
                           'its ansible_host is %s\'s address: set sglang_server_dist_init_host to the address the '
                           'other nodes reach %s at' % (rank0, where['name'], PCT_CONNECTION,
                                                        values.get('proxmox_container_node') or 'the node', rank0))
    if not isinstance(given, str) or not (ip(given) or HOST_NAME.fullmatch(given)):
        raise AddressError('sglang_server_dist_init_host=%s of %s is not an address or host name'
                           % (show(given), rank0))
    return http_url(given, port), controller


def address(hosts, host):
    """The server's address as ``host`` has it, from ``{host: {variable: value}}``.

    Only the variables host_plan.READ and PEER_READ declare are read; a host ``hosts`` lacks is a one-node
    server of its own; a variable not set is the role's default. Returns ``port`` and ``host`` (what
    the server binds), ``client_url`` (what a client on this host calls: on a node of rank > 0, rank
    0's ``controller_url``, or its ``sglang_server_dist_init_host`` when rank 0 is reached through
    pct), ``controller_url`` (what the controller calls: the server's rank 0; None when rank 0 is
    reached through pct and binds no real address), ``rank0`` and ``via`` (the hypervisor whose pct
    reaches rank 0, else None). Raises AddressError naming the variable and its value.
    """
    where = layout(hosts, host)
    values = hosts.get(host, {})
    port, bind_host, local, controller = _own(host, values)
    if where['nnodes'] > 1:
        rank0_client, rank0_controller = _rank0_urls(where, hosts)
        if where['rank'] > 0:
            local, controller = rank0_client, rank0_controller
    rank0 = hosts.get(where['rank0'], values)
    return {'port': port, 'host': bind_host, 'client_url': local, 'controller_url': controller, 'rank0': where['rank0'],
            'via': rank0.get('proxmox_container_node') if through_pct(rank0) else None}
