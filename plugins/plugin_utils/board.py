# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A board on the controller, where the workers of one ansible-playbook run leave what they saw for
each other: every task runs in its own worker process, so a result reaches another host's task of the
same step only this way. One JSON file per host, under a directory of the run's local temporary
directory (C.DEFAULT_LOCAL_TMP: every worker of the run shares it, and ansible-playbook removes it at
its end), each replaced whole so that a reader never sees half of one.

Used by server_wait (each node's last look at its unit, for the other nodes of the server) and by
pct_list and converged_state (a hypervisor's answer, which its containers' converged check waits for
in the same play)."""

from __future__ import annotations

import json
import os
import re
import time

# how often a waiting worker looks at the board
POLL_SECONDS = 0.02


class Board(object):
    """What each host posted, one JSON file per host under ``path`` (one directory per board)."""

    def __init__(self, path):
        self.path = path

    def _file(self, host):
        return os.path.join(self.path, re.sub(r'[^A-Za-z0-9_.-]', '_', host) + '.json')

    def post(self, host, value):
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        target = self._file(host)
        # one writer per host; the pid keeps a writer that outlived its task from sharing the name
        partial = '%s.%d.tmp' % (target, os.getpid())
        with open(partial, 'w') as out:
            json.dump(value, out)
        os.replace(partial, target)

    def read(self, hosts):
        """{host: value} of the ``hosts`` that posted."""
        values = {}
        for host in hosts:
            try:
                with open(self._file(host)) as posted:
                    values[host] = json.load(posted)
            except (OSError, ValueError):
                continue
        return values

    def wait(self, host, timeout, clock=time.monotonic, sleep=time.sleep):
        """What ``host`` posted, as soon as it has, or None when it has not within ``timeout`` seconds."""
        deadline = clock() + timeout
        while True:
            found = self.read([host])
            if host in found:
                return found[host]
            if clock() >= deadline:
                return None
            sleep(POLL_SECONDS)


def play_board(local_tmp, name, play_uuid):
    """The board ``name`` of one play of this run: a task posts there and a later task of the same play
    (on another host) reads it; another play of the run, even of the same playbook, has its own."""
    return Board(os.path.join(local_tmp, name, play_uuid))


# the board on which pct_list posts each hypervisor's answer for converged_state (node=)
PCT_LIST = 'pct_list'
