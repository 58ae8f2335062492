# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a systemd-run HTTP server looks from its host: the unit's state, /health's answer,
the tail of its log. Shared by server_health (the wait after a start) and converged_state
(is a host still as its last successful run left it).

Whether a unit is running is decided here only (unit_running): server_health returns it for the
server's unit, which the reclamation, extract.yml and the GPU check read; converged_state,
extraction_job_outcome and the filter systemd_unit_names (extraction_job's stop) call it for the
job's units."""

from __future__ import annotations

import http.client
import re
from urllib.parse import urlsplit

from ansible_collections.eagle3.extraction.plugins.module_utils import command

SYSTEMCTL_TIMEOUT = 30
# a service unit's name as the modules take it, whole
UNIT_NAME = re.compile(r'[A-Za-z0-9:_.@-]+\.service')
HEALTH_TIMEOUT = 5
# the most of a body get() reads (a master's metrics text is about 40 KiB)
BODY_LIMIT = 4 << 20
# systemd's ActiveState of a unit that runs or is about to (a start, a reload, an automatic restart's wait):
# it owns its port, its processes, its GPUs and its output, and nothing of it is reclaimed or restarted
RUNNING_STATES = ('active', 'activating', 'reloading')


def unit_running(active_state):
    """Whether a unit whose ``ActiveState`` systemd gave as ``active_state`` is running (or about to)."""
    return active_state in RUNNING_STATES


def health(url, timeout=HEALTH_TIMEOUT):
    """The HTTP status /health answers with, or None when nothing answers.

    http.client, not ansible's open_url: the server is on this host (no proxy, no redirect), and the
    converged check and the start's wait call this on every host of every run, where open_url's
    imports cost about 40 ms of CPU each time."""
    return get(url, timeout, 0)[0]


def get(url, timeout=HEALTH_TIMEOUT, limit=BODY_LIMIT):
    """(HTTP status, the first ``limit`` bytes of the body) of a GET of ``url``; (None, b'') when nothing
    answers. health() without the body; mooncake_health reads the master's metrics and metadata with it."""
    try:
        parts = urlsplit(url)
        if parts.scheme not in ('http', 'https') or not parts.hostname:
            return None, b''
        kind = http.client.HTTPSConnection if parts.scheme == 'https' else http.client.HTTPConnection
        connection = kind(parts.hostname, parts.port, timeout=timeout)
        try:
            connection.request('GET', (parts.path or '/') + ('?' + parts.query if parts.query else ''))
            response = connection.getresponse()
            return response.status, response.read(limit) if limit else b''
        finally:
            connection.close()
    except (OSError, ValueError, http.client.HTTPException):
        return None, b''


def unit_properties(unit, properties=('ActiveState', 'SubState', 'NRestarts'), timeout=SYSTEMCTL_TIMEOUT):
    """{property: value} from ``systemctl show``; empty values where systemctl cannot say."""
    try:
        out = command.run(['systemctl', 'show', '--property=' + ','.join(properties), '--', unit], timeout)[1]
    except (OSError, command.CommandTimeout):
        out = ''
    found = dict(line.split('=', 1) for line in out.splitlines() if '=' in line)
    return dict((name, found.get(name, '')) for name in properties)


def log_tail(path, offset=0, count=50, window=256 * 1024):
    """The last ``count`` lines written at or after byte ``offset`` (a log appended to across
    starts: only this start's lines), reading at most the last ``window`` bytes."""
    try:
        with open(path, 'rb') as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(offset if offset <= size else 0, size - window))
            lines = log.read().decode('utf-8', 'replace').splitlines()
    except OSError as exc:
        return ['(cannot read %s: %s)' % (path, exc)]
    return lines[-count:]
