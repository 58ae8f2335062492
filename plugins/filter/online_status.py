# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""online_status: what status.yml prints of an online job (training while extracting), from the trainer's state
(module online_training_status), the store's (module mooncake_health) and each gateway's /status, rendered by the
collection's one table renderer (module_utils/text_table.py)."""

from __future__ import annotations

DOCUMENTATION = r'''
name: online_status
short_description: The lines status.yml prints of an online job
version_added: 0.1.0
description:
  - The training (state, attempt, step, loss, samples/s, prompts published and consumed), then the store (memory
    used of its capacity, keys), then one row per capture gateway (prompts served, failed and in flight, bytes put
    into the store, whether its Mooncake client is up).
  - A part that could not be read shows V(-) and, where it said why, its reason.
options:
  _input:
    description: The trainer's state, as the module C(eagle3.extraction.online_training_status) returns it.
    type: dict
    required: true
  store:
    description: The module C(eagle3.extraction.mooncake_health)'s result (C(require=false)).
    type: dict
    default: {}
  gateways:
    description: Each gateway's C(/status) as C({url, json, status, msg}) (ansible.builtin.uri's results).
    type: list
    elements: dict
    default: []
'''

EXAMPLES = r'''
- name: Show the online job
  ansible.builtin.debug:
    msg: "{{ online_training_status | eagle3.extraction.online_status(store=__store, gateways=__gateways.results) }}"
'''

RETURN = r'''
_value:
  description: The lines to print.
  type: list
  elements: str
'''

from ansible_collections.eagle3.extraction.plugins.module_utils.text_table import table_lines

UNITS = (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10))


def _gib(value):
    """A size in the largest unit it fills (two decimals), bytes below a KiB."""
    if value is None:
        return '-'
    for name, size in UNITS:
        if value >= size:
            return '%.2f %s' % (float(value) / size, name)
    return '%d B' % value


def _or_dash(value):
    return '-' if value is None or value == '' else value


def _next_step(training):
    """What re-running extract.yml does with an attempt that is over or stopped (SpecForge never resumes a
    producer: a failed attempt is not restarted by its units), with the units' states."""
    state, attempt = training.get('state'), training.get('attempt') or 0
    units = ', '.join('%s %s' % (unit, found) for unit, found in sorted((training.get('units') or {}).items()))
    if state == 'failed':
        return ['attempt %d failed (%s); units: %s. Re-running extract.yml starts attempt %d (every prompt again).'
                % (attempt, training.get('reason') or '-', units or '-', attempt + 1)]
    if state == 'stopped':
        return ['attempt %d is open but no unit runs (units: %s). Re-running extract.yml goes on with it.'
                % (attempt, units or '-')]
    return []


def online_status(training, store=None, gateways=None):
    training, store = training or {}, store or {}
    lines = table_lines([
        ['TRAINING', 'ATTEMPT', 'STEP', 'LOSS', 'SAMPLES/S', 'PUBLISHED', 'CONSUMED'],
        [training.get('state', '-') + (' (%s)' % training['reason'] if training.get('reason') else ''),
         _or_dash(training.get('attempt')), _or_dash(training.get('step')), _or_dash(training.get('loss')),
         _or_dash(training.get('samples_per_s')), _or_dash(training.get('published')),
         _or_dash(training.get('consumed'))]])
    lines += _next_step(training)
    lines.append('')
    lines += table_lines([
        ['STORE', 'USED', 'CAPACITY', 'KEYS'],
        ['up' if store.get('up') else 'DOWN' + (': %s' % '; '.join(store['problems']) if store.get('problems') else ''),
         _gib(store.get('allocated_bytes')), _gib(store.get('capacity_bytes')), _or_dash(store.get('key_count'))]])
    lines.append('')
    rows = [['GATEWAY', 'SERVED', 'FAILED', 'IN FLIGHT', 'PUT', 'MOONCAKE']]
    for gateway in gateways or []:
        found = gateway.get('json') if isinstance(gateway.get('json'), dict) else None
        url = gateway.get('item') or gateway.get('url') or '-'
        if found is None:
            rows.append([url, 'UNREACHABLE: %s' % (gateway.get('msg') or gateway.get('status') or '-'), '', '', '', ''])
            continue
        rows.append([url, _or_dash(found.get('prompts_served')), _or_dash(found.get('prompts_failed')),
                     _or_dash(found.get('prompts_in_flight')), _gib(found.get('bytes_put')),
                     'ready' if found.get('mooncake_ready') else 'NOT READY'])
    return lines + table_lines(rows)


class FilterModule(object):
    def filters(self):
        return {'online_status': online_status}
