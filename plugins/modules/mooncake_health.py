#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: mooncake_health
short_description: Read Mooncake's master and its global segment, and wait until the store is up
version_added: 0.1.0
description:
  - Reads the master's metrics (Prometheus text at O(metrics_url)C(/metrics)) - the store's capacity, the bytes
    allocated, the keys, the clients and each mounted segment - and asks the HTTP metadata server O(metadata_server)
    for the descriptor of the segment on O(advertised).
  - The store is up when the master's metrics answer, the metadata server answers, the master holds at least
    O(segment_bytes) of capacity (the segment holder mounted its global segment) and, with O(advertised), that
    segment is named by O(advertised) and advertises it for its data (an address the peers cannot reach, such as a
    container bridge's, makes their reads fail with -800).
  - Looks once a second for up to O(timeout) seconds (0 looks once), and stops early when a unit of O(units) is not
    running. With O(require) it fails, saying what is not up; without, it returns what it found (status reports).
  - Changes nothing.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  metrics_url:
    description:
      - The master's metrics server, V(http://HOST:PORT) (its C(--metrics_port)); C(/metrics) is read.
    type: str
    required: true
  metadata_server:
    description:
      - The master's HTTP metadata server as the clients are given it, V(http://HOST:PORT/metadata).
    type: str
    required: true
  segment_bytes:
    description:
      - The global segment the holder mounts, in bytes; the store is up when the master's capacity is at least this.
        0 asks for no segment.
    type: int
    default: 0
  advertised:
    description:
      - The address the peers reach the segment holder at; its segment must be named by it and advertise it for
        data. Empty compares nothing.
    type: str
    default: ''
  units:
    description:
      - systemd units (C(.service)) that must be running; the wait ends, not up, as soon as one is not.
    type: list
    elements: str
    default: []
  timeout:
    description:
      - Seconds to wait for the store to be up, from 0 (look once) to 3600.
    type: float
    default: 0
  require:
    description:
      - Fail when the store is not up at the end, with what is not.
    type: bool
    default: true
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.server_health
    description: The same wait for an SGLang server's /health.
'''

EXAMPLES = r'''
- name: Wait two minutes for the master and its 32 GiB segment
  eagle3.extraction.mooncake_health:
    metrics_url: http://10.0.0.5:35903
    metadata_server: http://10.0.0.5:35880/metadata
    segment_bytes: 34359738368
    advertised: 10.0.0.5
    units: [eagle3-mooncake-master.service, eagle3-mooncake-segment.service]
    timeout: 120

- name: What the store holds, for a status report (never fails)
  eagle3.extraction.mooncake_health:
    metrics_url: http://10.0.0.5:35903
    metadata_server: http://10.0.0.5:35880/metadata
    require: false
  register: store
'''

RETURN = r'''
up:
  description: Whether the store is up (every check of the description passed).
  returned: always
  type: bool
  sample: true
master:
  description: Whether the master's metrics answered with its metrics.
  returned: always
  type: bool
metadata:
  description: Whether the HTTP metadata server answered.
  returned: always
  type: bool
mounted:
  description: Whether the master holds at least O(segment_bytes) of capacity.
  returned: always
  type: bool
capacity_bytes:
  description: The store's capacity, the segments together (C(master_total_capacity_bytes)); 0 when unknown.
  returned: always
  type: int
  sample: 34359738368
allocated_bytes:
  description: The bytes the objects hold (C(master_allocated_bytes)); 0 when unknown.
  returned: always
  type: int
key_count:
  description: The objects stored (C(master_key_count)); 0 when unknown.
  returned: always
  type: int
active_clients:
  description: The clients the master sees (C(master_active_clients)); 0 when unknown.
  returned: always
  type: int
segments:
  description: Each mounted segment - C(name) (HOST:PORT), C(capacity_bytes), C(allocated_bytes).
  returned: always
  type: list
  elements: dict
data_host:
  description: The TCP data host the segment on O(advertised) advertises on the metadata server, or null.
  returned: always
  type: str
problems:
  description: What is not up, in words; empty when up.
  returned: always
  type: list
  elements: str
'''

import json
import math
import re
import time
from urllib.parse import quote

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.mooncake_metrics import (
    MetricsError, holder, problems, usage)
from ansible_collections.eagle3.extraction.plugins.module_utils.server_probe import (
    UNIT_NAME, get, unit_properties, unit_running)
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show

REQUEST_TIMEOUT = 5
URL = re.compile(r'http://[A-Za-z0-9_.:\[\]-]+(/[A-Za-z0-9_./-]*)?')
# an address or host name (what mooncake_master_host takes), or empty
HOST = re.compile(r'[A-Za-z0-9_.:-]{0,253}')
EMPTY = {'capacity_bytes': 0, 'allocated_bytes': 0, 'key_count': 0, 'active_clients': 0, 'segments': []}


def _descriptor_host(metadata_server, name):
    """(whether the metadata server answered, the tcp_data_host of segment ``name``'s descriptor or None)."""
    status, body = get('%s?key=%s' % (metadata_server, quote('mooncake/ram/' + name, safe='')), REQUEST_TIMEOUT)
    if status != 200:
        return status is not None, None
    try:
        found = json.loads(body.decode('utf-8', 'replace'))
    except ValueError:
        return True, None
    host = found.get('tcp_data_host') if isinstance(found, dict) else None
    return True, host if isinstance(host, str) else None


def look(params):
    """One look at the store: the module's result less changed."""
    result = dict(EMPTY, up=False, master=False, metadata=False, mounted=False, data_host=None, problems=[])
    status, body = get(params['metrics_url'].rstrip('/') + '/metrics', REQUEST_TIMEOUT)
    if status != 200:
        result['problems'] = ['the master does not answer at %s/metrics (%s): is eagle3-mooncake-master.service '
                              'running?' % (params['metrics_url'].rstrip('/'), status or 'no answer')]
        return result
    try:
        found = usage(body.decode('utf-8', 'replace'))
    except MetricsError as exc:
        result['problems'] = ['%s/metrics: %s' % (params['metrics_url'].rstrip('/'), exc)]
        return result
    result.update(found, master=True, mounted=found['capacity_bytes'] >= params['segment_bytes'])
    mine = holder(found, params['advertised']) if params['advertised'] else None
    # the segment's descriptor, or (no segment to ask of) the bare endpoint, which answers 400 when up
    if mine:
        result['metadata'], result['data_host'] = _descriptor_host(params['metadata_server'], mine['name'])
    else:
        result['metadata'] = get(params['metadata_server'], REQUEST_TIMEOUT, 0)[0] is not None
    if not result['metadata']:
        result['problems'] = ['the metadata server does not answer at %s' % params['metadata_server']]
        return result
    result['problems'] = problems(found, params['segment_bytes'], params['advertised'], result['data_host'])
    result['up'] = not result['problems']
    return result


def stopped_units(units):
    """The units of ``units`` that are not running, each with its state in words."""
    stopped = []
    for unit in units:
        props = unit_properties(unit, ('ActiveState', 'SubState'))
        if not unit_running(props['ActiveState']):
            stopped.append('%s is %s/%s' % (unit, props['ActiveState'] or 'unknown', props['SubState'] or 'unknown'))
    return stopped


def watch(params):
    deadline = time.monotonic() + params['timeout']
    while True:
        result = look(params)
        if result['up']:
            return result
        stopped = stopped_units(params['units'])
        if stopped:
            result['problems'] = result['problems'] + ['%s (journalctl -u %s)' % (line, line.split()[0])
                                                       for line in stopped]
            return result
        if time.monotonic() >= deadline:
            return result
        time.sleep(1)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            metrics_url=dict(type='str', required=True),
            metadata_server=dict(type='str', required=True),
            segment_bytes=dict(type='int', default=0),
            advertised=dict(type='str', default=''),
            units=dict(type='list', elements='str', default=[]),
            timeout=dict(type='float', default=0),
            require=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in ('metrics_url', 'metadata_server'):
        if not URL.fullmatch(params[name]):
            module.fail_json(msg='%s=%s is not an http:// URL' % (name, show(params[name])))
    if params['segment_bytes'] < 0:
        module.fail_json(msg='segment_bytes=%s must be 0 or more' % show(params['segment_bytes']))
    if not HOST.fullmatch(params['advertised']):
        module.fail_json(msg='advertised=%s is not an address or host name' % show(params['advertised']))
    for unit in params['units']:
        if not UNIT_NAME.fullmatch(unit):
            module.fail_json(msg='units holds %s, not a unit name ending in .service' % show(unit))
    if not (math.isfinite(params['timeout']) and 0 <= params['timeout'] <= 3600):
        module.fail_json(msg='timeout=%s must be from 0 to 3600 seconds' % show(params['timeout']))

    result = watch(params)
    if params['require'] and not result['up']:
        module.fail_json(msg='mooncake: the store is not up: %s' % '; '.join(result['problems']), **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
