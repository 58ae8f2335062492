# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which host processes belong to a Proxmox LXC container (the ``vmid`` option).

Run on the hypervisor. The ownership rule, applied to every host process P:

1. P shares the PID namespace of the container's init (``/proc/P/ns/pid``), or
2. one of P's cgroup paths has the component ``lxc.payload.<vmid>`` (LXC 4+ on
   cgroup v1 and v2) or ``lxc/<vmid>`` (Proxmox on cgroup v2:
   ``/lxc/<vmid>/ns/...``); the monitor's ``lxc.monitor.<vmid>`` and
   ``lxc.monitor/<vmid>`` do not match, or
3. P lives in the container's network namespace (``/proc/P/ns/net``). This is
   the process started from the hypervisor with only ``nsenter --net``, which
   holds a port of the container and cannot be seen or killed from inside it.

Rules 1 and 3 only count when that namespace differs from the hypervisor's
own (the namespaces of this module's process): a container sharing the host
network (or PID namespace) must not make every host process "its" process.
Anything else is outside the container and is never signalled.
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.module_utils import command, pct, procfs


class ContainerError(Exception):
    """The container cannot be acted on (missing, stopped, pct failed)."""


def parse_lxc_info_pid(text):
    """``lxc-info -n <vmid> -p`` prints ``PID: <n>``."""
    match = re.search(r'^PID:\s*(\d+)\s*$', text, re.MULTILINE)
    return int(match.group(1)) if match else None


def container_init_pid(module, vmid, run=command.run, timeout=pct.DEFAULT_PCT_TIMEOUT):
    """Host PID of the container's init, through pct (lxc-info as fallback).

    Raises ContainerError with a message for the user when pct is missing, the
    container does not exist or is stopped, or pct hangs past ``timeout`` seconds.
    ``run`` is command.run (tests give a fake).
    """
    pct_path = module.get_bin_path('pct', opt_dirs=['/usr/sbin'])
    if pct_path is None:
        raise ContainerError(
            'vmid=%s: pct was not found; run the module on the Proxmox hypervisor that hosts container %s'
            % (vmid, vmid))
    try:
        status = pct.Pct(pct_path, timeout=timeout, run=run).status_verbose(vmid)
    except pct.PctError as exc:
        if exc.rc is None:
            raise ContainerError('vmid=%s: %s' % (vmid, exc))
        raise ContainerError('vmid=%s: `pct status %s --verbose` failed (rc=%s): %s'
                             % (vmid, vmid, exc.rc, (exc.stderr or exc.stdout).strip()))
    except pct.PctOutputError as exc:
        raise ContainerError('vmid=%s: %s' % (vmid, exc))
    if status['status'] != 'running':
        raise ContainerError('vmid=%s: container %s is %s, not running: there is nothing to reclaim in it'
                             % (vmid, vmid, status['status']))
    if status.get('pid', '').isdigit():
        return int(status['pid'])
    lxc_info = module.get_bin_path('lxc-info')
    if lxc_info is not None:
        try:
            rc, out, _err = run([lxc_info, '-n', str(vmid), '-p'], timeout)
        except (command.CommandTimeout, OSError):
            rc, out = None, ''
        pid = parse_lxc_info_pid(out) if rc == 0 else None
        if pid is not None:
            return pid
    raise ContainerError('vmid=%s: container %s is running but neither `pct status --verbose` nor '
                         '`lxc-info -p` gave its init PID' % (vmid, vmid))


def cgroup_pattern(vmid):
    return re.compile(r'(^|/)(lxc\.payload\.%d|lxc/%d)(/|$)' % (vmid, vmid))


class ContainerScope(object):
    """The processes of container ``vmid`` as seen from its hypervisor."""

    def __init__(self, vmid, init_pid, proc_root=procfs.PROC, own_pid='self'):
        self.vmid = vmid
        self.init_pid = init_pid
        self.proc_root = proc_root
        self._cgroup = cgroup_pattern(vmid)
        init_pidns = procfs.namespace_id(init_pid, 'pid', proc_root)
        init_netns = procfs.namespace_id(init_pid, 'net', proc_root)
        if init_pidns is None:
            raise ContainerError('vmid=%s: the container init (host PID %s) vanished or cannot be read'
                                 % (vmid, init_pid))
        host_pidns = procfs.namespace_id(own_pid, 'pid', proc_root)
        host_netns = procfs.namespace_id(own_pid, 'net', proc_root)
        self.pidns = init_pidns if init_pidns != host_pidns else None
        self.netns = init_netns if init_netns != host_netns else None
        self.net_dir = '%s/%d/net' % (proc_root, init_pid)

    @property
    def shares_host_network(self):
        return self.netns is None

    def reason(self, pid):
        """Why host process pid belongs to the container, or None if it does not."""
        if self.pidns is not None and procfs.namespace_id(pid, 'pid', self.proc_root) == self.pidns:
            return 'pid namespace'
        for path in procfs.read_cgroup(pid, self.proc_root):
            if self._cgroup.search(path):
                return 'cgroup'
        if self.netns is not None and procfs.namespace_id(pid, 'net', self.proc_root) == self.netns:
            return 'network namespace'
        return None

    def contains(self, pid):
        return self.reason(pid) is not None
