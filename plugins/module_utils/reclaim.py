# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What port_reclaim and process_reclaim share: their common options, the safety rules,
the signal-escalate-wait loop, and how a run ends (result, elapsed time, redaction, the
hint to escalate to the hypervisor)."""

from __future__ import annotations

import os
import signal
import time

from ansible_collections.eagle3.extraction.plugins.module_utils import procfs, validate
from ansible_collections.eagle3.extraction.plugins.module_utils.pct_scope import ContainerScope, container_init_pid
from ansible_collections.eagle3.extraction.plugins.module_utils.redact import redact_text, redact_value

# how often liveness is polled while waiting for processes to exit
POLL_INTERVAL = 0.05

# the longest a user may ask to wait for processes to exit, in seconds (an hour)
MAX_WAIT = 3600
# how long one external command (pct, lxc-info, nvidia-smi) may take by default, and at most, in seconds
DEFAULT_COMMAND_TIMEOUT = 60
MAX_COMMAND_TIMEOUT = 600


def common_argument_spec():
    """The options every reclaim module has (documented in doc_fragments/reclaim.py)."""
    return dict(
        signal_timeout=validate.number_option('float', default=10),
        kill_timeout=validate.number_option('float', default=10),
        command_timeout=validate.number_option('float', default=DEFAULT_COMMAND_TIMEOUT),
        vmid=validate.number_option('int'),
    )


class Protection(object):
    """Which processes the reclaim modules must never signal.

    PID 1, this module's own process and every ancestor of it (the shell and the
    SSH session Ansible runs in, or the ansible process itself with a local
    connection), kernel threads, and the init of any PID namespace (a
    container's PID 1, seen from the hypervisor, whose death stops the
    container). A process is identified by pid and start time, so a pid reused
    after we looked stays distinct.
    """

    def __init__(self, proc_root=procfs.PROC, own_pid=None):
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.reasons = {1: 'PID 1 (init)', self.own_pid: 'the reclaim module itself'}
        for parent in procfs.ancestors(self.own_pid, proc_root):
            self.reasons.setdefault(parent, 'an ancestor of the reclaim module (the session running it)')

    def reason(self, proc):
        """Why proc must not be signalled, or None if it may be."""
        if proc.pid in self.reasons:
            return self.reasons[proc.pid]
        if proc.kernel_thread:
            return 'a kernel thread'
        if proc.nspid and proc.nspid[-1] == 1:
            return 'the init (PID 1) of a PID namespace (a container)'
        return None


def describe_protected(proc, reason):
    entry = proc.as_dict()
    entry['reason'] = reason
    return entry


def _wait_while(items, still_there, timeout, clock, sleep):
    """Poll until no item is still there or timeout; return those still there."""
    deadline = clock() + timeout
    left = [item for item in items if still_there(item)]
    while left and clock() < deadline:
        sleep(min(POLL_INTERVAL, max(0.0, deadline - clock())))
        left = [item for item in left if still_there(item)]
    return left


def _wait_gone(targets, timeout, proc_root, clock, sleep):
    """Wait until every target exited or timeout; return the survivors."""
    return _wait_while(targets, lambda t: procfs.is_alive(t.pid, t.starttime, proc_root), timeout, clock, sleep)


def _send(targets, signum, killed, errors, proc_root):
    sent = []
    for target in targets:
        # re-check identity right before signalling: the pid may have been reused
        if not procfs.is_alive(target.pid, target.starttime, proc_root):
            continue
        try:
            os.kill(target.pid, signum)
        except ProcessLookupError:
            continue
        except PermissionError as exc:
            errors.append({'pid': target.pid, 'signal': signal.Signals(signum).name, 'error': str(exc)})
            continue
        killed.append({'pid': target.pid, 'signal': signal.Signals(signum).name})
        sent.append(target)
    return sent


class TerminateResult(object):
    def __init__(self):
        self.killed = []      # [{'pid', 'signal'}], in the order signals were sent
        self.errors = []      # [{'pid', 'signal', 'error'}] (EPERM)
        self.survivors = []   # Process objects still alive after SIGKILL + kill_timeout


def terminate(targets, signal_timeout, kill_timeout, proc_root=procfs.PROC,
              clock=time.monotonic, sleep=time.sleep):
    """SIGTERM every target, SIGKILL whatever still runs after signal_timeout,
    then wait up to kill_timeout for those to be gone.

    Targets are procfs.Process objects; the caller has already applied the
    Protection rules. A target we may not signal (EPERM) is not waited for: it
    is reported in errors and among the survivors straight away.
    """
    result = TerminateResult()
    if not targets:
        return result
    sent = _send(targets, signal.SIGTERM, result.killed, result.errors, proc_root)
    survivors = _wait_gone(sent, signal_timeout, proc_root, clock, sleep)
    if survivors:
        sent = _send(survivors, signal.SIGKILL, result.killed, result.errors, proc_root)
        survivors = _wait_gone(sent, kill_timeout, proc_root, clock, sleep)
    denied = set(e['pid'] for e in result.errors)
    survivors.extend(t for t in targets if t.pid in denied and procfs.is_alive(t.pid, t.starttime, proc_root)
                     and t not in survivors)
    result.survivors = survivors
    return result


def wait_reaped(zombies, timeout, proc_root=procfs.PROC, clock=time.monotonic, sleep=time.sleep):
    """Wait until the zombies' pids are gone (reaped); return those still there."""
    return _wait_while(zombies, lambda z: procfs.exists(z.pid, z.starttime, proc_root), timeout, clock, sleep)


COMMON_NUMBERS = {'signal_timeout': 'float', 'kill_timeout': 'float', 'command_timeout': 'float', 'vmid': 'int'}


def validate_common(params, numbers=None):
    """Messages for bad values of the common options, and for a number that is none or a control
    character in any option (``numbers``: the module's own number options, {name: 'int' or 'float'});
    the numbers of params are converted in place (validate.convert_numbers)."""
    errors = validate.option_value_errors(params, dict(COMMON_NUMBERS, **(numbers or {})))
    errors.extend(validate.number_errors(params, {
        'signal_timeout': (0, MAX_WAIT, 'seconds'),
        'kill_timeout': (0, MAX_WAIT, 'seconds'),
        'command_timeout': (1, MAX_COMMAND_TIMEOUT, 'seconds'),
    }))
    vmid_error = validate.vmid_error(params.get('vmid'))
    if vmid_error:
        errors.append(vmid_error)
    return errors


def container_scope(module, vmid, timeout):
    """The ContainerScope of container vmid on this hypervisor, or None without vmid.

    Raises pct_scope.ContainerError (pct missing, container stopped, pct hung)."""
    if vmid is None:
        return None
    return ContainerScope(vmid, container_init_pid(module, vmid, timeout=timeout))


class Run(object):
    """One run of a reclaim module: the result so far, its clock, and how it ends.

    Every way out goes through exit() or fail(), which add the elapsed time and redact
    secrets (an --api-key on a holder's command line) from the result and the message.
    """

    def __init__(self, module, **result):
        self.module = module
        self.start = time.monotonic()
        self.result = result

    def finish(self, **extra):
        self.result.update(extra)
        self.result['elapsed'] = round(time.monotonic() - self.start, 3)
        return redact_value(self.result)

    def exit(self, **extra):
        self.module.exit_json(**self.finish(**extra))

    def fail(self, msg, **extra):
        self.module.fail_json(msg=redact_text(msg), **self.finish(**extra))


def escalation_hint(module_name, vmid, who='the owner runs'):
    """What to do when a process cannot be seen or signalled from inside a container."""
    if vmid is not None:
        return ''
    return ('; if %s in an LXC container, run eagle3.extraction.%s on the Proxmox hypervisor with '
            'vmid=<the container\'s vmid> (delegate_to: the hypervisor)' % (who, module_name))


def survivors_text(survivors, proc_root=procfs.PROC):
    """'pid (command; why it may have survived)' for each process alive after SIGKILL."""
    return ', '.join('%s (%s; %s)' % (p.pid, p.command, survivor_hint(procfs.read_process(p.pid, proc_root) or p))
                     for p in survivors)


def survivor_hint(proc):
    """Why a process may have outlived SIGKILL, for the failure message."""
    if proc.state == 'D':
        return 'in uninterruptible sleep (state D, e.g. inside the GPU driver): it dies when the kernel call returns, or needs a GPU reset'
    return 'state %s' % proc.state
