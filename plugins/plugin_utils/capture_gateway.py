# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online mode's capture gateway config (the JSON the gateway reads: eagle3_extraction_job/gateway_config.py's
keys), made of the host plan's ``online`` section and the role's own settings.

Every address, port, URL and dir comes from the plan (plugin_utils/host_plan.py, the one owner of them): this only
places them under the gateway's keys. The role's settings are its variables, converted here (an inventory gives
strings) and named in SETTINGS. The filter capture_gateway_config calls it; the template writes what it returns.
"""

from __future__ import annotations

# the role's settings: {key of the settings dict: how it is converted}; every one is a key of the gateway's config
# but local_buffer_bytes (mooncake.local_buffer_size)
SETTINGS = {
    'rejected_dir': str,
    'api_key_file': str,
    'hidden_size': int,
    'request_timeout': float,
    'ack_timeout': float,
    'max_prompts': int,
    'store_threads': int,
    'stop_timeout': float,
    'server_wait': float,
    'local_buffer_bytes': int,
}
# what the config reads of the plan's online section, for the message when the plan lacks one
PLAN_KEYS = ('job', 'aux_layer_ids', 'master.metadata_server', 'master.master_server_address',
             'environment.MOONCAKE_LOCAL_HOSTNAME', 'environment.MOONCAKE_PROTOCOL', 'gateway.listen_host',
             'gateway.port', 'gateway.server_url', 'gateway.dump_dir')


class GatewayConfigError(ValueError):
    """The plan has no gateway for this host, lacks a key, or a setting is not of its type."""


def _read(online, dotted):
    found = online
    for part in dotted.split('.'):
        if not isinstance(found, dict) or part not in found:
            raise GatewayConfigError('the host plan\'s online section has no %s (it needs %s)'
                                     % (dotted, ', '.join(PLAN_KEYS)))
        found = found[part]
    return found


def _settings(settings):
    if not isinstance(settings, dict) or set(settings) != set(SETTINGS):
        given = sorted(settings) if isinstance(settings, dict) else settings
        raise GatewayConfigError('the gateway settings must be exactly %s, got %r' % (', '.join(sorted(SETTINGS)), given))
    converted = {}
    for key, convert in SETTINGS.items():
        value = settings[key]
        try:
            if isinstance(value, bool) or value is None:
                raise ValueError(value)
            converted[key] = convert(value)
        except (TypeError, ValueError):
            raise GatewayConfigError('the gateway setting %s=%r is not a %s' % (key, value, convert.__name__)) from None
    return converted


def gateway_config(online, settings):
    """The gateway's config dict from the host plan's ``online`` section (this host's: its ``gateway`` is set on a
    server's rank-0 host only) and the role's settings (SETTINGS). ``layer_ids`` is left out when the plan's
    ``aux_layer_ids`` is None: the capture runs with its default ids, which are the gateway's default too."""
    if not isinstance(online, dict):
        raise GatewayConfigError('this host takes no part in an online job (the host plan\'s online section is %r): '
                                 'set extraction_job_mode: online on the servers of the job' % (online,))
    if online.get('gateway') is None:
        raise GatewayConfigError('the host plan runs no capture gateway on this host (online.gateway is None: it is '
                                 "not a server's rank-0 host)")
    given = _settings(settings)
    config = {
        'job': _read(online, 'job'),
        'server_url': _read(online, 'gateway.server_url'),
        'dump_dir': _read(online, 'gateway.dump_dir'),
        'listen_host': _read(online, 'gateway.listen_host'),
        'listen_port': int(_read(online, 'gateway.port')),
        'mooncake': {
            # the address the peers reach this host at: the gateway's transfer engine advertises it (a bridge
            # address here makes the trainer's reads fail with -800)
            'local_hostname': _read(online, 'environment.MOONCAKE_LOCAL_HOSTNAME'),
            'metadata_server': _read(online, 'master.metadata_server'),
            'master_server_address': _read(online, 'master.master_server_address'),
            'protocol': _read(online, 'environment.MOONCAKE_PROTOCOL'),
            'local_buffer_size': given.pop('local_buffer_bytes'),
        },
    }
    config.update(given)
    layer_ids = _read(online, 'aux_layer_ids')
    if layer_ids is not None:
        try:
            config['layer_ids'] = [int(layer) for layer in layer_ids]
        except (TypeError, ValueError):
            raise GatewayConfigError('the host plan\'s online.aux_layer_ids=%r is not a list of layer ids'
                                     % (layer_ids,)) from None
    return config
