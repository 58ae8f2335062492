# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Mooncake's master says of its store: its metrics (Prometheus text at the metrics port's /metrics) read
into the numbers the mooncake_health module returns, and the verdict on them (is the segment mounted, does it
advertise the address the peers reach). Pure functions of text, so that a captured real metrics text tests them.
"""

from __future__ import annotations

import math
import re

# one sample line: name, optional {labels}, value, optional timestamp (the text format 0.0.4)
SAMPLE = re.compile(r'([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?[0-9]+)?')
LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
# the master's totals, and the per-segment gauges (label segment="HOST:PORT")
TOTALS = {'capacity_bytes': 'master_total_capacity_bytes', 'allocated_bytes': 'master_allocated_bytes',
          'key_count': 'master_key_count', 'active_clients': 'master_active_clients'}
SEGMENT_GAUGES = {'capacity_bytes': 'segment_total_capacity_bytes', 'allocated_bytes': 'segment_allocated_bytes'}
# the metadata server's key of a segment's descriptor (its buffers, its TCP data host and port)
SEGMENT_KEY = 'mooncake/ram/'


class MetricsError(ValueError):
    """The text is not the master's metrics (a metric the master always reports is missing, a value is not a
    number)."""


def _unescape(text):
    return text.replace('\\"', '"').replace('\\n', '\n').replace('\\\\', '\\')


def samples(text):
    """[(name, {label: value}, value as a float)] of every sample line; comments and blank lines are skipped."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        match = SAMPLE.fullmatch(line)
        if not match:
            raise MetricsError('line %d is not a metric sample: %r' % (number, line[:200]))
        labels = dict((key, _unescape(value)) for key, value in LABEL.findall(match.group(3) or ''))
        try:
            value = float(match.group(4))
        except ValueError:
            raise MetricsError('line %d: %r is not a number' % (number, match.group(4))) from None
        found.append((match.group(1), labels, value))
    return found


def _whole(value):
    return int(value) if math.isfinite(value) else 0


def usage(text):
    """The store as the master's metrics show it: capacity_bytes, allocated_bytes, key_count, active_clients (its
    totals) and segments ([{name, capacity_bytes, allocated_bytes}], by name). MetricsError when a total is
    missing: the text is not a Mooncake master's."""
    totals, segments = {}, {}
    by_gauge = dict((gauge, key) for key, gauge in SEGMENT_GAUGES.items())
    by_total = dict((metric, key) for key, metric in TOTALS.items())
    for name, labels, value in samples(text):
        if name in by_total and not labels:
            totals[by_total[name]] = _whole(value)
        elif name in by_gauge and 'segment' in labels:
            segments.setdefault(labels['segment'], {'name': labels['segment']})[by_gauge[name]] = _whole(value)
    missing = [TOTALS[key] for key in TOTALS if key not in totals]
    if missing:
        raise MetricsError('the metrics lack %s: not a Mooncake master' % ', '.join(missing))
    totals['segments'] = [dict({'capacity_bytes': 0, 'allocated_bytes': 0}, **segments[name])
                          for name in sorted(segments)]
    return totals


def segment_host(name):
    """The host part of a segment's name (HOST:PORT, [V6]:PORT)."""
    host = name.rsplit(':', 1)[0] if ':' in name else name
    return host[1:-1] if host.startswith('[') and host.endswith(']') else host


def holder(found, advertised):
    """The segment the holder on ``advertised`` mounted (usage()'s segment whose name's host is it, the largest
    when there are several), or None. Other clients (a trainer) may mount segments of their own."""
    mine = [segment for segment in found['segments'] if segment_host(segment['name']) == advertised]
    return max(mine, key=lambda segment: segment['capacity_bytes']) if mine else None


def problems(found, expected_bytes, advertised='', data_host=None):
    """Why the store is not up, in words ([] when it is): ``found`` is usage()'s, ``expected_bytes`` the segment
    the holder mounts; with ``advertised`` (the address the peers reach), the holder's segment must be named by it
    and its descriptor on the metadata server must advertise it for data (``data_host``, its tcp_data_host, None
    when there is no descriptor)."""
    if found['capacity_bytes'] < expected_bytes:
        return ['the global segment is not mounted: the master holds %d bytes of capacity, less than the segment of '
                '%d bytes (is eagle3-mooncake-segment.service running?)' % (found['capacity_bytes'], expected_bytes)]
    if not advertised:
        return []
    mine = holder(found, advertised)
    others = ', '.join(segment['name'] for segment in found['segments']) or 'none'
    if mine is None or mine['capacity_bytes'] < expected_bytes:
        return ['no segment of %d bytes at %s, the address the peers reach, is mounted (the segments: %s): the '
                "holder advertises another address, and the peers' reads would fail with -800 "
                '(MC_TCP_BIND_ADDRESS, MOONCAKE_LOCAL_HOSTNAME)' % (expected_bytes, advertised, others)]
    if data_host is None:
        return ['segment %s has no descriptor on the metadata server' % mine['name']]
    if data_host != advertised:
        return ['segment %s advertises %s for its data, not %s, the address the peers reach: their reads would '
                'fail with -800 (MC_TCP_BIND_ADDRESS, MOONCAKE_LOCAL_HOSTNAME)' % (mine['name'], data_host, advertised)]
    return []
