#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: process_reclaim
short_description: Kill leftover server processes, reap their zombies and wait for GPU memory to come back
version_added: 0.1.0
description:
  - Selects processes whose command line or process title matches one of the O(match) regexes (by default SGLang's
    launcher and its C(sglang::) children, such as C(sglang::scheduler_TP0) reparented to PID 1 after the launcher
    died) and, with O(gpu_holders), every process that holds an NVIDIA GPU.
  - Sends C(SIGTERM) to all of them, C(SIGKILL) to those still running after O(signal_timeout) seconds, and waits up
    to O(kill_timeout) seconds for them to exit.
  - With O(zombies), matching processes in state Z are reaped through their parent. The parent gets C(SIGCHLD)
    (a nudge to reap) and, if it is itself a leftover selected here, is killed so that init adopts and reaps the
    zombie.
  - With O(gpu_memory_max_mib), polls C(nvidia-smi) after killing until every GPU uses at most that many MiB, or
    fails after O(gpu_wait_timeout) seconds naming the GPUs and their MiB.
  - Nothing selected is success with C(changed=false).
  - Besides the processes every reclaim module protects (see the notes), never signals the NVIDIA driver's own
    services (C(nvidia-persistenced), C(nv-fabricmanager), C(nv-hostengine), C(nvidia-smi), C(Xorg)) when they
    are only selected for holding a GPU.
  - With O(vmid), the module runs on the Proxmox hypervisor and acts on that container from the host, by host PID.
    Nothing outside the container is ever signalled.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  match:
    description:
      - Python regular expressions searched (not anchored unless they say so) in each process's command line, with
        its arguments joined by spaces, and in its process name (C(comm), at most 15 characters, which is all a
        zombie has left).
      - An empty list selects nothing by name; then O(gpu_holders) must be V(true).
      - A pattern that could select every process is refused - one that matches the empty string (V(""), V(.*),
        V(a*)), or the command lines of two or more unrelated system programs (C(sshd), C(systemd), C(bash), ...).
    type: list
    elements: str
    default: ['^sglang::', '(^|\s)-m\s+sglang\.launch_server(\s|$)']
  gpu_holders:
    description:
      - Also select every process with an NVIDIA device (C(/dev/nvidia*)) open, and every process C(nvidia-smi)
        lists as a compute process (its PID and its process name must both match a visible process, since NVML
        knows no PID namespaces).
    type: bool
    default: false
  zombies:
    description:
      - Reap matching processes in state Z by signalling their parent (C(SIGCHLD)), and kill the parent if it is
        itself selected. A zombie whose parent is protected or not selected is reported in RV(zombies) and left.
    type: bool
    default: true
  exclude:
    description:
      - PIDs never to signal, even if selected (host PIDs with O(vmid)), each from 1 to 4194304.
    type: list
    elements: raw
    default: []
  gpu_memory_max_mib:
    description:
      - After killing, wait until every GPU uses at most this many MiB (V(0) for an empty GPU, at most 16777216),
        polling C(nvidia-smi).
      - Omitted, GPU memory is not waited for.
    type: raw
  gpu_wait_timeout:
    description:
      - Seconds to wait for O(gpu_memory_max_mib) before failing with the GPUs still above it, 0 to 3600.
    type: raw
    default: 60
  nvidia_smi_path:
    description:
      - Absolute path of C(nvidia-smi). Omitted, it is looked up on E(PATH), then in C(/usr/bin), C(/usr/local/bin),
        C(/usr/sbin), C(/sbin) and C(/usr/local/nvidia/bin).
      - C(nvidia-smi) is run only with O(gpu_holders), O(gpu_memory_max_mib) or this option set; it must work when
        O(gpu_memory_max_mib) is set, otherwise a failure is a warning.
    type: path
extends_documentation_fragment:
  - eagle3.extraction.reclaim
  - eagle3.extraction.attributes
notes:
  - Reads C(/proc) directly, so it needs Linux and, to see other users' processes and signal them, root.
  - A module cannot print while it runs, so the progress of the GPU memory wait comes back in
    RV(gpu_memory_progress), one sample each time a GPU's usage changed.
  - In check mode it reports what it would kill in RV(would_kill) and signals nothing.
seealso:
  - module: eagle3.extraction.port_reclaim
'''

EXAMPLES = r'''
- name: Kill SGLang leftovers (the launcher and its sglang children) and reap their zombies
  eagle3.extraction.process_reclaim: {}

- name: Kill everything holding a GPU and wait until the GPUs are empty
  eagle3.extraction.process_reclaim:
    match: []
    gpu_holders: true
    gpu_memory_max_mib: 0
    gpu_wait_timeout: 120
  register: gpu_reclaim

- name: Show GPU memory before and after
  ansible.builtin.debug:
    msg: "{{ gpu_reclaim.gpu_memory_before }} -> {{ gpu_reclaim.gpu_memory_after }}"

- name: Report what would be killed, kill nothing
  eagle3.extraction.process_reclaim:
    match: ['^sglang::', 'my_extraction_worker\.py']
  check_mode: true

# A leftover the container cannot see or signal keeps its GPU memory, so the
# in-container run fails its GPU wait: then act on container 101 from its hypervisor.
- name: Reclaim inside the container
  eagle3.extraction.process_reclaim:
    gpu_holders: true
    gpu_memory_max_mib: 0
    gpu_wait_timeout: 30
    signal_timeout: 5
  register: reclaim_in_container
  ignore_errors: true

- name: Reclaim container 101 from the Proxmox hypervisor
  eagle3.extraction.process_reclaim:
    gpu_holders: true
    gpu_memory_max_mib: 0
    signal_timeout: 5
    vmid: 101
  delegate_to: pve1
  when: reclaim_in_container is failed
'''

RETURN = r'''
matched:
  description:
    - Processes selected to be signalled, with what selected them.
    - Each has the keys of a holder in M(eagle3.extraction.port_reclaim)'s RV(eagle3.extraction.port_reclaim#module:holders)
      (C(pid), the host PID with O(vmid); C(ppid), C(user), C(uid), C(state), C(name), C(cmdline) with its secrets
      redacted, C(nspid)) and C(matched_by), what selected it (V(match[N]), the Nth pattern of O(match) counted
      from 0, never the pattern itself, which may hold what it was written to find; V(gpu device), V(nvidia-smi
      compute app)).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 5120, ppid: 1, user: root, uid: 0, state: S, name: "sglang::schedul", cmdline: "sglang::scheduler_TP0",
            nspid: [5120], matched_by: ["match[0]"]}]
would_kill:
  description: PIDs that would be (check mode) or were sent C(SIGTERM).
  returned: always
  type: list
  elements: int
  sample: [5120, 5121]
killed:
  description:
    - Signals sent, in order, each with the C(pid) signalled and the C(signal) (V(SIGTERM) or V(SIGKILL)).
    - Empty in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 5120, signal: SIGTERM}, {pid: 5120, signal: SIGKILL}]
zombies:
  description: Matching zombies found, with their parent and what was done about them.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: PID of the zombie.
      type: int
    name:
      description: Its process name.
      type: str
    ppid:
      description: Its parent's PID.
      type: int
    parent_cmdline:
      description: The parent's command line.
      type: str
    action:
      description: >-
        V(kill_parent) (the parent is a leftover and is killed), V(signal_parent) (the parent got C(SIGCHLD)), or
        V(none) (the parent is protected, excluded or gone; init reaps orphans by itself).
      type: str
    reason:
      description: Why the action was chosen.
      type: str
  sample: [{pid: 5200, name: "sglang::detoken", ppid: 5120, parent_cmdline: "sglang::scheduler_TP0",
            action: kill_parent, reason: the parent is selected}]
reaped:
  description: PIDs of the zombies that were gone (reaped) at the end.
  returned: always
  type: list
  elements: int
  sample: [5200]
protected:
  description: Selected processes never signalled, with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 812, cmdline: /usr/bin/python3 /usr/bin/ansible localhost -m process_reclaim,
            reason: an ancestor of the reclaim module (the session running it)}]
excluded:
  description: Selected processes skipped because their PID is in O(exclude).
  returned: always
  type: list
  elements: dict
  sample: []
errors:
  description: Signals the kernel refused (EPERM), each with the C(pid), the C(signal) and the C(error).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 4242, signal: SIGTERM, error: "[Errno 1] Operation not permitted"}]
gpu_apps:
  description: Compute processes C(nvidia-smi) listed before acting (V(null) when it was not run).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 592, process_name: python3, used_memory_mib: 20998, gpu_uuid: GPU-c78b0a93-9298-0633-b6f0-dd3c6ad32227}]
gpu_memory_before:
  description: Memory of each GPU before acting, in MiB (V(null) when C(nvidia-smi) was not run).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
    memory_used_mib:
      description: memory.used.
      type: int
    memory_total_mib:
      description: memory.total.
      type: int
  sample: [{index: 0, memory_used_mib: 21007, memory_total_mib: 143771}, {index: 1, memory_used_mib: 21007, memory_total_mib: 143771}]
gpu_memory_after:
  description: Memory of each GPU at the end, as RV(gpu_memory_before).
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, memory_used_mib: 0, memory_total_mib: 143771}, {index: 1, memory_used_mib: 0, memory_total_mib: 143771}]
gpu_memory_progress:
  description: While waiting for O(gpu_memory_max_mib), one sample per change of any GPU's usage.
  returned: always
  type: list
  elements: dict
  sample: [{elapsed: 0.0, used_mib: [21007, 21007]}, {elapsed: 0.21, used_mib: [0, 0]}]
vmid:
  description: The container acted on, or V(null).
  returned: always
  type: int
  sample: 101
elapsed:
  description: Seconds the module took.
  returned: always
  type: float
  sample: 3.52
'''

import os
import re
import signal
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils import gpu_memory
from ansible_collections.eagle3.extraction.plugins.module_utils import nvidia_smi_runner
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs
from ansible_collections.eagle3.extraction.plugins.module_utils import reclaim
from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_smi import NvidiaSmiError
from ansible_collections.eagle3.extraction.plugins.module_utils.pct_scope import ContainerError
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import (
    executable_file_error, number_error, number_errors, number_option, show)

# how often nvidia-smi is polled while waiting for GPU memory to come back
GPU_POLL_INTERVAL = 0.25

# the driver's own services hold /dev/nvidia* open; killing them helps nothing
GPU_SERVICE_NAMES = ('nvidia-persiste', 'nvidia-persistenced', 'nv-fabricmanage', 'nv-fabricmanager',
                     'nv-hostengine', 'nvidia-smi', 'Xorg', 'nvidia-powerd')


# the largest PID Linux hands out (PID_MAX_LIMIT on 64-bit)
PID_MAX = 4194304
# the most GPU memory a limit may name, in MiB (16 TiB)
GPU_MEMORY_MAX_MIB = 16 * 1024 * 1024

# Command lines of system programs that no reclaim pattern has any business selecting. A
# pattern that matches two or more of them (or the empty string, which every process has)
# would select whatever runs on the host: sshd, dbus, other servers.
UNRELATED_PROGRAMS = (
    'sshd: root@pts/0', '/usr/sbin/sshd -D', '/lib/systemd/systemd --user', 'dbus-daemon --system',
    '-bash', 'cron -f', '/sbin/agetty -o -p -- \\u --noclear tty1 linux', 'rsyslogd -n -iNONE',
)


def pattern_error(index, pattern):
    """Why match[index] may not be used, or None: it must compile and must not select everything."""
    where = 'match[%d]' % index
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return '%s: %s is not a valid regular expression: %s' % (where, show(pattern), exc)
    if compiled.search(''):
        return ('%s: %s matches the empty string, so it would select every process on the host; give a pattern '
                'that names the program (e.g. ^sglang::)' % (where, show(pattern)))
    unrelated = [program for program in UNRELATED_PROGRAMS if compiled.search(program)]
    if len(unrelated) >= 2:
        return ('%s: %s matches unrelated system programs (%s), so it would select far more than a leftover '
                'server; give a pattern that names the program' % (where, show(pattern), ', '.join(unrelated[:3])))
    return None


def validate(params):
    """Every option checked before anything is read or signalled: (compiled patterns, error messages).

    The numbers of ``params`` (as the task gave them) are converted in place."""
    errors = reclaim.validate_common(params, numbers={'exclude': 'int', 'gpu_memory_max_mib': 'int',
                                                      'gpu_wait_timeout': 'float'})
    errors.extend(number_errors(params, {
        'gpu_memory_max_mib': (0, GPU_MEMORY_MAX_MIB, 'MiB'),
        'gpu_wait_timeout': (0, reclaim.MAX_WAIT, 'seconds'),
    }))
    for index, pid in enumerate(params['exclude']):
        error = number_error('exclude[%d]' % index, pid, 1, PID_MAX)
        if error:
            errors.append(error + ' (a PID)')
    patterns = []
    for index, pattern in enumerate(params['match']):
        error = pattern_error(index, pattern)
        if error:
            errors.append(error)
        else:
            patterns.append(re.compile(pattern))
    if not params['match'] and not params['gpu_holders']:
        errors.append('match is empty and gpu_holders is false: give at least one regex in match, or set gpu_holders')
    error = executable_file_error('nvidia_smi_path', params['nvidia_smi_path'])
    if error:
        errors.append(error)
    return patterns, errors


def find_nvidia_smi(module):
    """The nvidia-smi runner, or None when none is needed or none was found."""
    params = module.params
    if not (params['nvidia_smi_path'] or params['gpu_holders'] or params['gpu_memory_max_mib'] is not None):
        return None
    try:
        path = nvidia_smi_runner.find(module, params['nvidia_smi_path'])
    except NvidiaSmiError:
        return None
    return nvidia_smi_runner.NvidiaSmi(path, timeout=params['command_timeout'])


class GpuReader(object):
    """nvidia-smi queries; a failure is fatal only when GPU memory must be waited for."""

    def __init__(self, run, smi):
        self.run = run
        self.module = run.module
        self.smi = smi
        self.required = self.module.params['gpu_memory_max_mib'] is not None
        if smi is None and self.module.params['gpu_holders'] and not self.required:
            self.module.warn('gpu_holders: nvidia-smi was not found, so only processes with /dev/nvidia* open are '
                             'selected and GPU memory is not reported')

    def _query(self, func):
        if self.smi is None:
            if self.required:
                return self.run.fail('gpu_memory_max_mib is set but nvidia-smi was not found: install the NVIDIA '
                                     'driver utilities or give nvidia_smi_path')
            return None
        try:
            return func(self.smi)
        except gpu_memory.GpuQueryError as exc:
            if self.required:
                return self.run.fail('gpu_memory_max_mib is set but nvidia-smi does not work: %s' % exc)
            self.module.warn('nvidia-smi does not work, GPU memory is not reported: %s' % exc)
            self.smi = None
            return None

    def memory(self):
        return self._query(gpu_memory.query_gpu_memory)

    def apps(self):
        return self._query(gpu_memory.query_compute_apps)


class Selection(object):
    """Which processes to signal, which zombies to reap, and which to leave alone."""

    def __init__(self, processes, patterns, params, protection, scope, gpu_apps):
        self.targets = []
        self.zombie_procs = []
        self.protected = []
        self.excluded = []
        self.matched_by = {}
        exclude = set(params['exclude'])
        apps_by_pid = {}
        for app in gpu_apps or []:
            apps_by_pid.setdefault(app['pid'], app)
        for pid, proc in sorted(processes.items()):
            reasons = self._reasons(proc, patterns, params['gpu_holders'], apps_by_pid)
            if not reasons:
                continue
            if scope is not None and not scope.contains(pid):
                continue
            if proc.zombie:
                if params['zombies']:
                    self.zombie_procs.append(proc)
                continue
            if pid in exclude:
                self.excluded.append(dict(proc.as_dict(), matched_by=reasons))
                continue
            reason = protection.reason(proc)
            if reason is None and proc.name in GPU_SERVICE_NAMES and all(not r.startswith('match[') for r in reasons):
                reason = 'an NVIDIA driver service'
            if reason is not None:
                self.protected.append(dict(reclaim.describe_protected(proc, reason), matched_by=reasons))
                continue
            self.matched_by[pid] = reasons
            self.targets.append(proc)
        self.zombies = [self._zombie_plan(z, processes, protection, exclude, scope) for z in self.zombie_procs]

    @staticmethod
    def _reasons(proc, patterns, gpu_holders, apps_by_pid):
        reasons = []
        for index, pattern in enumerate(patterns):
            if pattern.search(proc.name) or (proc.cmdline and pattern.search(proc.command)):
                # its place in the list, not its text: a pattern may be a secret written to find its process
                reasons.append('match[%d]' % index)
        if gpu_holders and not proc.kernel_thread:
            if gpu_memory.holds_gpu_device(procfs.fd_targets(proc.pid)):
                reasons.append('gpu device')
            app = apps_by_pid.get(proc.pid)
            if app is not None and gpu_memory.same_program(app['process_name'], proc):
                reasons.append('nvidia-smi compute app')
        return reasons

    def _zombie_plan(self, zombie, processes, protection, exclude, scope):
        parent = processes.get(zombie.ppid)
        plan = {'pid': zombie.pid, 'name': zombie.name, 'ppid': zombie.ppid,
                'parent_cmdline': parent.command if parent else None}
        target_pids = set(p.pid for p in self.targets)
        if parent is None:
            plan.update(action='none', reason='the parent is gone; init reaps orphans')
        elif parent.pid in target_pids:
            plan.update(action='kill_parent', reason='the parent is selected too (a leftover)')
        elif protection.reason(parent) is not None:
            plan.update(action='none', reason='the parent is %s; it must not be signalled' % protection.reason(parent))
        elif parent.pid in exclude:
            plan.update(action='none', reason='the parent is in exclude')
        elif scope is not None and not scope.contains(parent.pid):
            plan.update(action='none', reason='the parent is outside container %s' % scope.vmid)
        else:
            plan.update(action='signal_parent', reason='the parent is not selected: it gets SIGCHLD to reap')
        return plan

    def matched_out(self):
        return [dict(p.as_dict(), matched_by=self.matched_by[p.pid]) for p in self.targets]


def nudge_parents(plans, processes, errors):
    """SIGCHLD to the parents of zombies, so that a parent which reaps on SIGCHLD does it now."""
    for plan in plans:
        if plan['action'] != 'signal_parent':
            continue
        parent = processes[plan['ppid']]
        if not procfs.is_alive(parent.pid, parent.starttime):
            continue
        try:
            os.kill(parent.pid, signal.SIGCHLD)
        except ProcessLookupError:
            continue
        except PermissionError as exc:
            errors.append({'pid': parent.pid, 'signal': 'SIGCHLD', 'error': str(exc)})


def reap_zombies(module, selection, processes, errors):
    """After the kills: nudge the parents that were not killed, then wait (up to
    kill_timeout) for the zombies we acted on to be reaped; return their pids."""
    nudge_parents(selection.zombies, processes, errors)
    acted_on = [z for z, plan in zip(selection.zombie_procs, selection.zombies) if plan['action'] != 'none']
    left = reclaim.wait_reaped(acted_on, module.params['kill_timeout'])
    if left:
        module.warn('zombie(s) not reaped within %ss: %s'
                    % (module.params['kill_timeout'], ', '.join('%s (parent %s)' % (z.pid, z.ppid) for z in left)))
    return [z.pid for z in acted_on if z not in left]


def wait_gpu_memory(gpu, limit, timeout):
    """Poll nvidia-smi until every GPU is at or under limit MiB; return (gpus, progress)."""
    start = time.monotonic()
    progress = []
    last = None
    while True:
        gpus = gpu.memory()
        used = [g['memory_used_mib'] for g in gpus]
        if used != last:
            progress.append({'elapsed': round(time.monotonic() - start, 3), 'used_mib': used})
            last = used
        if not gpu_memory.over_limit(gpus, limit) or time.monotonic() - start >= timeout:
            return gpus, progress
        time.sleep(GPU_POLL_INTERVAL)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            match=dict(type='list', elements='str',
                       default=[r'^sglang::', r'(^|\s)-m\s+sglang\.launch_server(\s|$)']),
            gpu_holders=dict(type='bool', default=False),
            zombies=dict(type='bool', default=True),
            exclude=number_option('int', type='list', default=[]),
            gpu_memory_max_mib=number_option('int'),
            gpu_wait_timeout=number_option('float', default=60),
            nvidia_smi_path=dict(type='path'),
            **reclaim.common_argument_spec()
        ),
        supports_check_mode=True,
    )
    params = module.params
    patterns, errors = validate(params)
    if errors:
        module.fail_json(msg='; '.join(errors), elapsed=0)
    run = reclaim.Run(module, changed=False, vmid=params['vmid'])

    try:
        scope = reclaim.container_scope(module, params['vmid'], params['command_timeout'])
    except ContainerError as exc:
        run.fail(str(exc))
    protection = reclaim.Protection()
    gpu = GpuReader(run, find_nvidia_smi(module))
    gpu_before = gpu.memory()
    gpu_apps = gpu.apps() if params['gpu_holders'] else None

    processes = procfs.snapshot()
    selection = Selection(processes, patterns, params, protection, scope, gpu_apps)
    run.result.update(
        changed=bool(selection.targets) or any(z['action'] == 'kill_parent' for z in selection.zombies),
        matched=selection.matched_out(),
        would_kill=[p.pid for p in selection.targets],
        killed=[],
        zombies=selection.zombies,
        reaped=[],
        protected=selection.protected,
        excluded=selection.excluded,
        errors=[],
        gpu_apps=gpu_apps,
        gpu_memory_before=gpu_before,
        gpu_memory_after=gpu_before,
        gpu_memory_progress=[],
    )
    if module.check_mode:
        run.exit()

    outcome = reclaim.terminate(selection.targets, params['signal_timeout'], params['kill_timeout'])
    run.result['killed'] = outcome.killed
    run.result['errors'] = outcome.errors
    run.result['reaped'] = reap_zombies(module, selection, processes, run.result['errors'])
    run.result['changed'] = bool(outcome.killed) or bool(run.result['reaped'])

    if outcome.survivors:
        run.fail('process(es) still alive after SIGKILL and %ss: %s%s'
                 % (params['kill_timeout'], reclaim.survivors_text(outcome.survivors),
                    reclaim.escalation_hint('process_reclaim', params['vmid'], who='they run')))

    if params['gpu_memory_max_mib'] is not None:
        gpus, progress = wait_gpu_memory(gpu, params['gpu_memory_max_mib'], params['gpu_wait_timeout'])
        run.result.update(gpu_memory_after=gpus, gpu_memory_progress=progress)
        over = gpu_memory.over_limit(gpus, params['gpu_memory_max_mib'])
        if over:
            run.fail('GPU memory still above gpu_memory_max_mib=%s MiB after %ss: %s%s'
                     % (params['gpu_memory_max_mib'], params['gpu_wait_timeout'],
                        ', '.join('GPU %s uses %s MiB' % (g['index'], g['memory_used_mib']) for g in over),
                        reclaim.escalation_hint('process_reclaim', params['vmid'],
                                                who='the holder is not visible here because it runs')))
    elif gpu_before is not None:
        run.result['gpu_memory_after'] = gpu.memory()
    run.exit()


if __name__ == '__main__':
    main()
