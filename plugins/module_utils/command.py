# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run an external command (nvidia-smi, pct, lxc-info) with a deadline.

AnsibleModule.run_command has no timeout (hence subprocess here, and the sanity ignore for
it): a wedged GPU driver makes nvidia-smi block in the kernel forever, and the module (and the
play) with it. Here the command runs in its own
session; at the deadline the whole process group gets SIGKILL (a process blocked in the
driver ignores SIGTERM), and CommandTimeout names the command and the timeout. Output is
decoded as UTF-8 with replacement, under the C locale, as run_command does.
"""

from __future__ import annotations

import os
import signal
import subprocess

from ansible_collections.eagle3.extraction.plugins.module_utils.redact import redact_argv

# seconds a killed command gets to let go of its pipes before we stop reading them
_REAP_GRACE = 5


class CommandTimeout(Exception):
    """The command did not finish within ``timeout`` seconds and was killed."""

    def __init__(self, argv, timeout):
        self.argv = list(argv)
        self.timeout = timeout
        super(CommandTimeout, self).__init__(
            '`%s` did not finish within its timeout of %s seconds and was killed (a wedged driver or a hung '
            'service?)' % (shown(argv), timeout))


def shown(argv):
    """A command line for a message: arguments joined by spaces, secrets redacted."""
    return ' '.join(redact_argv([str(arg) for arg in argv]))


def run(argv, timeout, env=None):
    """Run ``argv`` (a list, never a shell string); return (rc, stdout, stderr).

    Raises CommandTimeout when it runs longer than ``timeout`` seconds, and OSError when it
    cannot be started (missing, not executable, a directory).
    """
    argv = [str(arg) for arg in argv]
    environ = dict(os.environ if env is None else env, LC_ALL='C', LANG='C')
    # Popen, not run_command: run_command has no timeout, and a command stuck in a wedged driver
    # must be killed, with its process group, at a deadline
    proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=environ, start_new_session=True, close_fds=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.communicate(timeout=_REAP_GRACE)
        except subprocess.TimeoutExpired:
            # a grandchild left the group and keeps the pipes open: stop waiting for it
            proc.kill()
            proc.wait()
        raise CommandTimeout(argv, timeout)
    return proc.returncode, out.decode('utf-8', 'replace'), err.decode('utf-8', 'replace')
