# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pct_list: pct list and the sha256 of each container's configuration file on a Proxmox VE node, in one
shell command through the connection, read on the controller (module_utils/pct.py's parse_list, and
module_utils/file_digest.py's fingerprint of each file).

No Python runs on the node: extract.yml lists every hypervisor's containers on every run, and a module there
costs more than pct itself (the interpreter, the module's payload, ansible's module_utils compiled again each
time); the hypervisors' answer is what every container's converged check waits for."""

from __future__ import annotations

import posixpath
import re
import shlex
import uuid

from ansible.plugins.action import ActionBase

from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import files_fingerprint
from ansible_collections.eagle3.extraction.plugins.module_utils.pct import PctOutputError, parse_list
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.action_args import validated

ARGUMENT_SPEC = {
    'pct_path': {'type': 'str', 'default': '/usr/sbin/pct'},
    'command_timeout': {'type': 'int', 'default': 120},
    'conf_dir': {'type': 'str', 'default': '/etc/pve/lxc'},
}
# pct lives in /usr/sbin, which a non-login SSH shell may not have on PATH
PATH = '/usr/sbin:/usr/bin:/sbin:/bin'
# seconds pct gets after the TERM at its timeout before timeout(1) sends KILL (a process blocked on pmxcfs)
KILL_AFTER = 5
# timeout(1): the time ran out (124; 137 when KILL ended it); the command could not be run (126) or found (127)
TIMED_OUT = (124, 137)
CANNOT_RUN = (126, 127)
# sha256sum's line: the digest, a space, a space or * (text or binary mode), the path
SHA256_LINE = re.compile(r'([0-9a-f]{64}) [ *](.+)')


def input_problems(args):
    problems = []
    for name in ('pct_path', 'conf_dir'):
        value = args[name]
        if not posixpath.isabs(value) or any(ord(c) < 32 or ord(c) == 127 for c in value):
            problems.append('%s: %s is not an absolute path' % (name, show(value)))
    if not 1 <= args['command_timeout'] <= 86400:
        problems.append('command_timeout: %s is not a number of seconds from 1 to 86400' % args['command_timeout'])
    return problems


def shell_command(args, marker):
    """The one command the node runs: pct list (its exit code after a line that starts with ``marker``), then the
    sha256 of every configuration file (one that cannot be read is left out). Every value is quoted."""
    return ('PATH=%s; export PATH; timeout -k %d %d %s list; printf "\\n%s %%d\\n" "$?"; '
            'sha256sum -- %s/*.conf 2>/dev/null; exit 0'
            % (PATH, KILL_AFTER, args['command_timeout'], shlex.quote(args['pct_path']), marker,
               shlex.quote(args['conf_dir'])))


def read_answer(args, marker, answer):
    """pct_list's result from what the node printed (``answer``: rc, stdout, stderr of shell_command)."""
    stdout, stderr = answer.get('stdout', ''), answer.get('stderr', '')
    shown = '%s list' % args['pct_path']
    at = stdout.rfind('\n%s ' % marker)
    if at < 0:
        return dict(failed=True, rc=answer.get('rc'), stderr=stderr,
                    msg='the node did not run %s (exit code %s): %s' % (shown, answer.get('rc'), stderr.strip()))
    status, dummy, sums = stdout[at + 1:].partition('\n')
    rc = int(status.split()[1])
    if rc in TIMED_OUT:
        return dict(failed=True, rc=None, stderr=stderr,
                    msg='`%s` did not finish within its timeout of %d seconds and was killed (a hung pmxcfs?)'
                    % (shown, args['command_timeout']))
    if rc in CANNOT_RUN:
        return dict(failed=True, rc=None, stderr=stderr,
                    msg='pct_path %s cannot be run (exit code %d): %s' % (args['pct_path'], rc, stderr.strip()))
    if rc != 0:
        return dict(failed=True, rc=rc, stderr=stderr,
                    msg='%s failed with exit code %d: %s' % (shown, rc, stderr.strip()))
    try:
        containers = parse_list(stdout[:at])
    except PctOutputError as exc:
        return dict(failed=True, rc=rc, stderr=stderr, msg=str(exc))
    digests = {}
    for line in sums.splitlines():
        found = SHA256_LINE.fullmatch(line)
        if found:
            digests[posixpath.basename(found.group(2))] = found.group(1)
    # the path as pct_container names it (conf_dir as given, then <vmid>.conf): the fingerprint holds the path
    config_states = {}
    for vmid in sorted(containers):
        name = '%d.conf' % vmid
        config_states[str(vmid)] = files_fingerprint({posixpath.join(args['conf_dir'], name): digests.get(name)})
    return dict(changed=False, rc=rc, stderr=stderr,
                containers=dict((str(vmid), values) for vmid, values in sorted(containers.items())),
                config_states=config_states,
                running=sorted(vmid for vmid, values in containers.items() if values['status'] == 'running'))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    # it only reads, so a --check run lists as a real one does
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args, error = validated('pct_list', ARGUMENT_SPEC, self._task.args)
        problems = [] if error else input_problems(args)
        if error or problems:
            return dict(result, failed=True, msg=error or 'pct_list: %s' % '; '.join(problems))
        # a line pct cannot print: where its output ends and its exit code is
        marker = 'eagle3-pct-list-%s' % uuid.uuid4().hex
        answer = self._low_level_execute_command(shell_command(args, marker), sudoable=True)
        result.update(read_answer(args, marker, answer))
        return result
