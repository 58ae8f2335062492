# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where Mooncake's master is reached: the one owner of that fact.

The master and its segment holder bind and advertise ``mooncake_master_host``; empty, it is the address the
other hosts reach the master's host at (server_address.reached_at: its ansible_host, else its name), which a
container reached through its hypervisor does not have (its ansible_host is the node's). From that address
and the ports come what every Mooncake client is given: ``master_server_address`` (HOST:RPC_PORT) and
``metadata_server`` (http://HOST:METADATA_PORT/metadata), and the metrics URL the health module reads. The
mooncake_master role reads it through the lookup eagle3.extraction.mooncake_master_plan; the host plan's
online section is to read it of the master's host for the servers, gateways and trainers.
"""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import PCT_CONNECTION
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import (
    HOST_NAME, WILDCARD, AddressError, host_port, http_url, ip)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_address import reached_at
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults

PORTS = ('mooncake_master_rpc_port', 'mooncake_master_metadata_port', 'mooncake_master_metrics_port',
         'mooncake_master_segment_port')
# what the address is made of, of the master's host
READ = ('mooncake_master_host',) + PORTS + ('ansible_host', 'ansible_connection')


def advertised(name, values):
    """The address the master on host ``name`` binds and advertises, from its ``{variable: value}`` (a variable
    not set is the role's default); AddressError naming the variable and its value."""
    given = values.get('mooncake_master_host', '')
    if given:
        if not isinstance(given, str) or given in WILDCARD or not (ip(given) or HOST_NAME.fullmatch(given)):
            raise AddressError('mooncake_master_host=%s of %s is not an address the other hosts reach; give an IPv4 '
                               'or IPv6 address (without brackets) or a host name, not a wildcard' % (show(given), name))
        return given
    found = reached_at(name, values)
    if found is None:
        raise AddressError('%s is reached through its hypervisor (ansible_connection=%s), so its ansible_host is the '
                           "node's address: set mooncake_master_host to the address the servers and trainers reach "
                           '%s at' % (name, PCT_CONNECTION, name))
    return found


def endpoints(name, values):
    """What a Mooncake client of the master on host ``name`` is given, and the ports: ``host`` (advertised()),
    ``master_server_address``, ``metadata_server``, ``metrics_url``, and each port by its variable's name less
    the prefix (``rpc_port``...)."""
    host = advertised(name, values)
    ports = spec_defaults('mooncake_master', PORTS)
    ports.update((key, values[key]) for key in PORTS if key in values)
    ports = dict((key[len('mooncake_master_'):], int(value)) for key, value in ports.items())
    found = {'host': host,
             'master_server_address': host_port(host, ports['rpc_port']),
             'metadata_server': 'http://%s/metadata' % host_port(host, ports['metadata_port']),
             'metrics_url': http_url(host, ports['metrics_port'])}
    found.update(ports)
    return found


# what the units' command lines are made of, beyond the address
COMMAND_READ = ('mooncake_master_venv', 'mooncake_master_segment_bytes', 'mooncake_master_kv_lease_ms')


def commands(name, values):
    """The two units' command lines and the segment holder's environment, from the master host's
    ``{variable: value}``: endpoints() and ``master`` (argv), ``segment`` (argv), ``segment_environment``. The
    master binds its three servers on the advertised address; the holder mounts the global segment there and
    advertises it to the transfer engine (an address the peers cannot reach makes their reads fail with -800)."""
    found = endpoints(name, values)
    given = spec_defaults('mooncake_master', COMMAND_READ)
    given.update((key, values[key]) for key in COMMAND_READ if key in values)
    binary = given['mooncake_master_venv'].rstrip('/') + '/bin/'
    host = found['host']
    found['master'] = [
        binary + 'mooncake_master', '--enable_http_metadata_server=true',
        '--rpc_address=%s' % host, '--rpc_port=%d' % found['rpc_port'],
        '--http_metadata_server_host=%s' % host, '--http_metadata_server_port=%d' % found['metadata_port'],
        '--metrics_host=%s' % host, '--metrics_port=%d' % found['metrics_port'],
        '--default_kv_lease_ttl=%d' % int(given['mooncake_master_kv_lease_ms'])]
    found['segment'] = [
        binary + 'mooncake_client', '--host=%s' % host, '--port=%d' % found['segment_port'],
        '--global_segment_size=%d' % int(given['mooncake_master_segment_bytes']),
        '--master_server_address=%s' % found['master_server_address'],
        '--metadata_server=%s' % found['metadata_server'], '--protocol=tcp']
    found['segment_environment'] = {'MC_TCP_BIND_ADDRESS': host, 'MOONCAKE_LOCAL_HOSTNAME': host}
    return found
