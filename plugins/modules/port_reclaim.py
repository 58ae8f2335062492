#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: port_reclaim
short_description: Free a TCP port by stopping every process that listens on it
version_added: 0.1.0
description:
  - Finds every process that has a listening TCP socket on O(port) open, IPv4 and IPv6, by reading
    C(/proc/net/tcp), C(/proc/net/tcp6) and C(/proc/<pid>/fd). Children that inherited the socket count as holders too.
  - Sends C(SIGTERM) to all holders, C(SIGKILL) to those still running after O(signal_timeout) seconds, and waits until
    nothing listens on the port any more.
  - Nothing listening on the port is success with C(changed=false).
  - Inside an LXC container a holder can be invisible (started from the hypervisor with C(nsenter --net)) or
    impossible to signal. The module then fails with what it found and says to run it on the Proxmox hypervisor
    with O(vmid); see the examples.
  - With O(vmid), the module runs on the Proxmox hypervisor, reads the container's network namespace through its
    init process and kills holders of that container by host PID. A holder outside the container is never signalled.
  - If a protected process (see the notes) or a process outside the container holds the port beside killable ones,
    nothing is signalled, since killing the others could not free the port.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  port:
    description:
      - The TCP port to free, an integer from 1 to 65535 (V(true) is not a port).
    type: raw
    required: true
  address:
    description:
      - Only reclaim listeners that conflict with a server binding this IP address, that is listeners bound to it or
        to the wildcard (C(0.0.0.0), C(::)). An IPv4-mapped IPv6 listener counts as its IPv4 address.
      - A wildcard here (V(0.0.0.0) or V(::)) takes every listener of that family, and V(::) (dual-stack) every
        listener on the port.
      - Omitted, every listener on O(port) is reclaimed.
    type: str
extends_documentation_fragment:
  - eagle3.extraction.reclaim
  - eagle3.extraction.attributes
notes:
  - Reads C(/proc) directly, so it needs Linux and, to see other users' sockets and signal their processes, root.
  - In check mode it reports the listeners, the holders and RV(would_kill), signals nothing, and fails, as a real run
    would, when a listener's owner cannot be reclaimed.
seealso:
  - module: eagle3.extraction.process_reclaim
  - module: ansible.builtin.wait_for
    description: O(ansible.builtin.wait_for#module:state=drained) waits for connections to end without killing anything.
'''

EXAMPLES = r'''
- name: Free the SGLang port before starting the server
  eagle3.extraction.port_reclaim:
    port: 8000

- name: Free only what conflicts with 127.0.0.1:30000, giving holders 30 s to shut down
  eagle3.extraction.port_reclaim:
    port: 30000
    address: 127.0.0.1
    signal_timeout: 30

- name: Report who holds the port, kill nothing
  eagle3.extraction.port_reclaim:
    port: 8000
  check_mode: true
  register: port_8000

# A holder started from the hypervisor (nsenter --net) cannot be seen or killed
# inside the container: try there first, then escalate on the hypervisor.
- name: Free port 8000 inside the container
  eagle3.extraction.port_reclaim:
    port: 8000
  register: port_in_container
  ignore_errors: true

- name: Free port 8000 from the Proxmox hypervisor, acting on container 101 only
  eagle3.extraction.port_reclaim:
    port: 8000
    vmid: 101
  delegate_to: pve1
  when: port_in_container is failed
'''

RETURN = r'''
port:
  description: The port that was reclaimed.
  returned: always
  type: int
  sample: 8000
address:
  description: The address given in O(address), or V(null).
  returned: always
  type: str
  sample: 127.0.0.1
vmid:
  description: The container acted on, or V(null) without O(vmid).
  returned: always
  type: int
  sample: 101
listeners:
  description: The listening sockets found on the port before acting.
  returned: always
  type: list
  elements: dict
  contains:
    family:
      description: V(ipv4) or V(ipv6).
      type: str
    address:
      description: The bound address.
      type: str
    port:
      description: The port.
      type: int
    inode:
      description: Socket inode, as in C(/proc/<pid>/fd/*) links C(socket:[inode]).
      type: int
    owner_visible:
      description: Whether at least one process holding the socket was found.
      type: bool
  sample: [{family: ipv4, address: 0.0.0.0, port: 8000, inode: 81623, owner_visible: true}]
holders:
  description: Every process found holding one of the listening sockets (those protected or outside the container included).
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: PID (the host PID with O(vmid)).
      type: int
    ppid:
      description: Parent PID.
      type: int
    user:
      description: Name of the real user.
      type: str
    uid:
      description: Real user id.
      type: int
    state:
      description: State letter from C(/proc/<pid>/status) (V(S), V(R), V(D), V(Z), ...).
      type: str
    name:
      description: Process name (C(comm), at most 15 characters).
      type: str
    cmdline:
      description: Command line, arguments joined by spaces.
      type: str
    nspid:
      description: The PID in each nested PID namespace, outermost first (C(NSpid)).
      type: list
      elements: int
    container_pid:
      description: With O(vmid), the PID as seen inside the container, or V(null) outside its PID namespace.
      type: int
      returned: with O(vmid)
    in_container:
      description: With O(vmid), why the process belongs to the container (V(pid namespace), V(cgroup), V(network namespace)), or V(null).
      type: str
      returned: with O(vmid)
  sample: [{pid: 4242, ppid: 1, user: root, uid: 0, state: S, name: python3, cmdline: python3 -m sglang.launch_server --port 8000, nspid: [4242]}]
killed:
  description: Signals sent, in order; empty in check mode.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: PID signalled.
      type: int
    signal:
      description: V(SIGTERM) or V(SIGKILL).
      type: str
  sample: [{pid: 4242, signal: SIGTERM}, {pid: 4242, signal: SIGKILL}]
would_kill:
  description: PIDs that would be signalled (check mode) or were to be signalled (first round).
  returned: always
  type: list
  elements: int
  sample: [4242]
protected:
  description: Holders never signalled, with the reason (PID 1, the module's ancestors, kernel threads, namespace inits).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 1, cmdline: /sbin/init, reason: PID 1 (init)}]
errors:
  description: Signals the kernel refused (EPERM), with the error.
  returned: always
  type: list
  elements: dict
  sample: []
port_free:
  description: Whether nothing listens on the port (matching O(address)) at the end; V(false) in check mode while it is held.
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds the module took.
  returned: always
  type: float
  sample: 10.31
'''

import ipaddress
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs
from ansible_collections.eagle3.extraction.plugins.module_utils import reclaim
from ansible_collections.eagle3.extraction.plugins.module_utils.pct_scope import ContainerError
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import number_error, number_option, show

# a holder that respawns the listener (a supervisor we may not touch) must not keep us looping
MAX_ROUNDS = 3


def parse_address(value):
    """An ipaddress object for the address option, None for any; ValueError if it is not an IP."""
    if value is None:
        return None
    return ipaddress.ip_address(value)


def validate(params):
    """The address as an ipaddress object (or None), after checking every option; (address, errors).

    The numbers of ``params`` (as the task gave them) are converted in place."""
    errors = reclaim.validate_common(params, numbers={'port': 'int'})
    port_error = number_error('port', params['port'], 1, 65535)
    if port_error is None and params['port'] is not None and not isinstance(params['port'], int):
        port_error = 'port: %s is not an integer port number from 1 to 65535' % show(params['port'])
    if port_error:
        errors.insert(0, port_error)
    address = None
    try:
        address = parse_address(params['address'])
    except ValueError:
        errors.append('address: %s is not an IPv4 or IPv6 address; give one, or leave address out for any'
                      % show(params['address']))
    return address, errors


def find_holders(inodes, proc_root=procfs.PROC):
    """Processes with any of the socket inodes open: pid -> (Process, the inodes it holds)."""
    holders = {}
    if not inodes:
        return holders
    for pid in procfs.list_pids(proc_root):
        held = procfs.socket_inodes(pid, proc_root) & inodes
        if held:
            proc = procfs.read_process(pid, proc_root)
            if proc is not None:
                holders[pid] = (proc, held)
    return holders


class PortState(object):
    """One look at the port: its listeners, their holders, and what may be signalled."""

    def __init__(self, port, address, scope, protection, net_dir):
        self.listeners = procfs.find_listeners(port, address, net_dir)
        found = find_holders(set(s['inode'] for s in self.listeners))
        self.holders = dict((pid, proc) for pid, (proc, dummy) in found.items())
        self.targets = []
        self.protected = []
        self.memberships = {}
        owned = set()      # inodes some visible process holds
        blocked = set()    # inodes a process we must not signal holds: they stay open whatever we kill
        for pid, (proc, held) in sorted(found.items()):
            owned |= held
            reason = protection.reason(proc)
            if scope is not None:
                self.memberships[pid] = scope.reason(pid)
                if reason is None and self.memberships[pid] is None:
                    reason = 'outside container %s' % scope.vmid
            if reason is None:
                self.targets.append(proc)
            else:
                self.protected.append(reclaim.describe_protected(proc, reason))
                blocked |= held
        self.owners = owned
        self.hidden = [s for s in self.listeners if s['inode'] not in owned]
        self.stuck = [s for s in self.listeners if s['inode'] in blocked]

    def listeners_out(self):
        return [{'family': s['family'], 'address': str(s['address']), 'port': s['port'],
                 'inode': s['inode'], 'owner_visible': s['inode'] in self.owners} for s in self.listeners]

    def holders_out(self, scope):
        out = []
        for pid, proc in sorted(self.holders.items()):
            entry = proc.as_dict()
            if scope is not None:
                in_ns = scope.pidns is not None and self.memberships.get(pid) == 'pid namespace'
                entry['container_pid'] = proc.nspid[-1] if in_ns else None
                entry['in_container'] = self.memberships.get(pid)
            out.append(entry)
        return out


def blocked_message(params, state):
    """Why the port cannot be freed from here, and what to do."""
    port = params['port']
    parts = []
    if state.hidden:
        parts.append('socket inode(s) %s on port %s have no owner this module can see'
                     % (', '.join(str(s['inode']) for s in state.hidden), port))
    if state.stuck:
        parts.append('port %s is also held by protected or out-of-scope process(es): %s'
                     % (port, ', '.join('%s (%s: %s)' % (p['pid'], p['cmdline'], p['reason']) for p in state.protected)))
    if params['vmid'] is None:
        parts.append('the owner is outside this container\'s view or may not be signalled from here%s'
                     % reclaim.escalation_hint('port_reclaim', None, who='the server runs'))
    return '; '.join(parts)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=number_option('int', required=True),
            address=dict(type='str'),
            **reclaim.common_argument_spec()
        ),
        supports_check_mode=True,
    )
    params = module.params
    run = reclaim.Run(module, changed=False, port=params['port'], address=params['address'], vmid=params['vmid'])
    address, errors = validate(params)
    if errors:
        module.fail_json(msg='; '.join(errors), elapsed=0)

    try:
        scope = reclaim.container_scope(module, params['vmid'], params['command_timeout'])
    except ContainerError as exc:
        run.fail(str(exc))
    net_dir = os.path.join(procfs.PROC, 'net')
    if scope is not None:
        net_dir = scope.net_dir
        if scope.shares_host_network:
            module.warn('container %s shares the host network namespace: only its own processes are reclaimed, '
                        'holders are matched by PID namespace and cgroup' % params['vmid'])
    protection = reclaim.Protection()

    state = PortState(params['port'], address, scope, protection, net_dir)
    if state.hidden:
        # a holder may have been exiting (or forking) while we read /proc: look once more
        time.sleep(0.1)
        state = PortState(params['port'], address, scope, protection, net_dir)
    run.result.update(
        changed=bool(state.targets),
        listeners=state.listeners_out(),
        holders=state.holders_out(scope),
        killed=[],
        would_kill=[p.pid for p in state.targets],
        protected=state.protected,
        errors=[],
        port_free=not state.listeners,
    )

    if not state.listeners:
        run.exit()
    if state.hidden or state.stuck:
        # killing the visible holders cannot free the port: act on nothing
        run.fail(blocked_message(params, state), changed=False)
    if module.check_mode:
        run.exit()

    for round_no in range(1, MAX_ROUNDS + 1):
        outcome = reclaim.terminate(state.targets, params['signal_timeout'], params['kill_timeout'])
        run.result['killed'].extend(outcome.killed)
        run.result['errors'].extend(outcome.errors)
        if outcome.survivors:
            run.fail('port %s: process(es) still alive after SIGKILL and %ss: %s%s'
                     % (params['port'], params['kill_timeout'], reclaim.survivors_text(outcome.survivors),
                        reclaim.escalation_hint('port_reclaim', params['vmid'], who='it runs')),
                     port_free=False)
        state = PortState(params['port'], address, scope, protection, net_dir)
        if not state.listeners:
            run.exit(port_free=True)
        if state.hidden or state.stuck or not state.targets or round_no == MAX_ROUNDS:
            break
        # new holders appeared (a child forked in between, a respawn): another round

    run.fail('port %s is still held after %s round(s): %s'
             % (params['port'], round_no, blocked_message(params, state) or 'holders keep coming back: %s'
                % ', '.join('%s (%s)' % (p.pid, p.command) for p in state.targets)),
             port_free=False, holders=state.holders_out(scope), listeners=state.listeners_out())


if __name__ == '__main__':
    main()
