# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safety rules and the signal, escalate, wait loop shared by the reclaim modules."""

from __future__ import annotations

import os
import signal
import time

from ansible_collections.eagle3.extraction.plugins.module_utils import procfs

# how often liveness is polled while waiting for processes to exit
POLL_INTERVAL = 0.05

# Proxmox VE guest ids
VMID_MIN = 100
VMID_MAX = 999999999


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


def validate_common(params):
    """Messages for bad values of the options both modules share."""
    errors = []
    for name in ('signal_timeout', 'kill_timeout'):
        if params[name] < 0:
            errors.append('%s must be 0 or more seconds, got %s' % (name, params[name]))
    vmid = params.get('vmid')
    if vmid is not None and not VMID_MIN <= vmid <= VMID_MAX:
        errors.append('vmid must be a Proxmox container id between %d and %d, got %s' % (VMID_MIN, VMID_MAX, vmid))
    return errors


def survivor_hint(proc):
    """Why a process may have outlived SIGKILL, for the failure message."""
    if proc.state == 'D':
        return 'in uninterruptible sleep (state D, e.g. inside the GPU driver): it dies when the kernel call returns, or needs a GPU reset'
    return 'state %s' % proc.state
