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
  - Never signals PID 1, the module's own process or its ancestors (the SSH session and shell Ansible runs in),
    kernel threads, the init of a PID namespace (a container's PID 1), or the NVIDIA driver's own services
    (C(nvidia-persistenced), C(nv-fabricmanager), C(nv-hostengine), C(nvidia-smi), C(Xorg)) when they are only
    selected for holding a GPU.
  - With O(vmid), the module runs on the Proxmox hypervisor and acts on that container from the host, by host PID.
    A process belongs to the container when it shares the PID namespace of the container's init, sits in the
    container's cgroup (C(lxc.payload.<vmid>) or C(/lxc/<vmid>/)), or lives in the container's network namespace
    (unless the container shares the host's network). Nothing outside the container is ever signalled.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  match:
    description:
      - Python regular expressions searched (not anchored unless they say so) in each process's command line, with
        its arguments joined by spaces, and in its process name (C(comm), at most 15 characters, which is all a
        zombie has left).
      - An empty list selects nothing by name; then O(gpu_holders) must be V(true).
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
      - PIDs never to signal, even if selected (host PIDs with O(vmid)).
    type: list
    elements: int
    default: []
  signal_timeout:
    description:
      - Seconds to wait after C(SIGTERM) before sending C(SIGKILL) to the processes still running.
    type: float
    default: 10
  kill_timeout:
    description:
      - Seconds to wait after C(SIGKILL) for the processes to exit, and for their zombies to be reaped, before giving up.
    type: float
    default: 10
  gpu_memory_max_mib:
    description:
      - After killing, wait until every GPU uses at most this many MiB (V(0) for an empty GPU), polling C(nvidia-smi).
      - Omitted, GPU memory is not waited for.
    type: int
  gpu_wait_timeout:
    description:
      - Seconds to wait for O(gpu_memory_max_mib) before failing with the GPUs still above it.
    type: float
    default: 60
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). Omitted, it is looked up on E(PATH) (and C(/usr/bin), C(/usr/local/bin)).
      - C(nvidia-smi) is run only with O(gpu_holders), O(gpu_memory_max_mib) or this option set; it must work when
        O(gpu_memory_max_mib) is set, otherwise a failure is a warning.
    type: path
  vmid:
    description:
      - Proxmox VE id of an LXC container (100 to 999999999). The module must then run on the container's
        hypervisor (use C(delegate_to)) and only ever signals processes of that container, including those that
        cannot be seen or signalled from inside it. A container that is not running is an error.
    type: int
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: linux
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
  description: Processes selected to be signalled, with what selected them.
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
      description: State letter from C(/proc/<pid>/status).
      type: str
    name:
      description: Process name (C(comm)).
      type: str
    cmdline:
      description: Command line, arguments joined by spaces (the name in brackets when empty).
      type: str
    nspid:
      description: The PID in each nested PID namespace, outermost first.
      type: list
      elements: int
    matched_by:
      description: What selected it (V(match <regex>), V(gpu device), V(nvidia-smi compute app)).
      type: list
      elements: str
  sample: [{pid: 5120, ppid: 1, user: root, uid: 0, state: S, name: "sglang::schedul", cmdline: "sglang::scheduler_TP0",
            nspid: [5120], matched_by: ["match ^sglang::"]}]
would_kill:
  description: PIDs that would be (check mode) or were sent C(SIGTERM).
  returned: always
  type: list
  elements: int
  sample: [5120, 5121]
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
  description: Signals the kernel refused (EPERM), with the error.
  returned: always
  type: list
  elements: dict
  sample: []
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
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs
from ansible_collections.eagle3.extraction.plugins.module_utils import reclaim
from ansible_collections.eagle3.extraction.plugins.module_utils.pct_scope import (
    ContainerError, ContainerScope, container_init_pid)

# how often nvidia-smi is polled while waiting for GPU memory to come back
GPU_POLL_INTERVAL = 0.25

# the driver's own services hold /dev/nvidia* open; killing them helps nothing
GPU_SERVICE_NAMES = ('nvidia-persiste', 'nvidia-persistenced', 'nv-fabricmanage', 'nv-fabricmanager',
                     'nv-hostengine', 'nvidia-smi', 'Xorg', 'nvidia-powerd')


def compile_patterns(module, patterns):
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            module.fail_json(msg='match: %r is not a valid regular expression: %s' % (pattern, exc), elapsed=0)
    return compiled


def validate(module):
    params = module.params
    errors = reclaim.validate_common(params)
    bad = [pid for pid in params['exclude'] if pid <= 0]
    if bad:
        errors.append('exclude must list PIDs (integers above 0), got %s' % bad)
    if params['gpu_memory_max_mib'] is not None and params['gpu_memory_max_mib'] < 0:
        errors.append('gpu_memory_max_mib must be 0 or more MiB, got %s' % params['gpu_memory_max_mib'])
    if params['gpu_wait_timeout'] < 0:
        errors.append('gpu_wait_timeout must be 0 or more seconds, got %s' % params['gpu_wait_timeout'])
    if not params['match'] and not params['gpu_holders']:
        errors.append('match is empty and gpu_holders is false: give at least one regex in match, or set gpu_holders')
    path = params['nvidia_smi_path']
    if path is not None and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        errors.append('nvidia_smi_path %s is not an executable file' % path)
    if errors:
        module.fail_json(msg='; '.join(errors), elapsed=0)
    return compile_patterns(module, params['match'])


def find_nvidia_smi(module):
    params = module.params
    if params['nvidia_smi_path']:
        return params['nvidia_smi_path']
    if params['gpu_holders'] or params['gpu_memory_max_mib'] is not None:
        return module.get_bin_path('nvidia-smi', opt_dirs=['/usr/bin', '/usr/local/bin'])
    return None


class GpuReader(object):
    """nvidia-smi queries; a failure is fatal only when GPU memory must be waited for."""

    def __init__(self, module, nvidia_smi, start):
        self.module = module
        self.nvidia_smi = nvidia_smi
        self.start = start
        self.required = module.params['gpu_memory_max_mib'] is not None
        # what was found and done so far, returned with a failure
        self.result = {}
        if nvidia_smi is None and module.params['gpu_holders'] and not self.required:
            module.warn('gpu_holders: nvidia-smi was not found, so only processes with /dev/nvidia* open are '
                        'selected and GPU memory is not reported')

    def _query(self, func):
        if self.nvidia_smi is None:
            if self.required:
                return self.fail('gpu_memory_max_mib is set but nvidia-smi was not found: install the NVIDIA '
                                 'driver utilities or give nvidia_smi_path')
            return None
        try:
            return func(self.module, self.nvidia_smi)
        except gpu_memory.GpuQueryError as exc:
            if self.required:
                return self.fail('gpu_memory_max_mib is set but nvidia-smi does not work: %s' % exc)
            self.module.warn('nvidia-smi does not work, GPU memory is not reported: %s' % exc)
            self.nvidia_smi = None
            return None

    def fail(self, msg):
        self.result['elapsed'] = round(time.monotonic() - self.start, 3)
        self.module.fail_json(msg=msg, **self.result)

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
            if reason is None and proc.name in GPU_SERVICE_NAMES and all(not r.startswith('match') for r in reasons):
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
        for pattern in patterns:
            if pattern.search(proc.name) or (proc.cmdline and pattern.search(proc.command)):
                reasons.append('match %s' % pattern.pattern)
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
            exclude=dict(type='list', elements='int', default=[]),
            signal_timeout=dict(type='float', default=10),
            kill_timeout=dict(type='float', default=10),
            gpu_memory_max_mib=dict(type='int'),
            gpu_wait_timeout=dict(type='float', default=60),
            nvidia_smi_path=dict(type='path'),
            vmid=dict(type='int'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    start = time.monotonic()
    patterns = validate(module)

    scope = None
    if params['vmid'] is not None:
        try:
            scope = ContainerScope(params['vmid'], container_init_pid(module, params['vmid']))
        except ContainerError as exc:
            module.fail_json(msg=str(exc), elapsed=round(time.monotonic() - start, 3))
    protection = reclaim.Protection()
    gpu = GpuReader(module, find_nvidia_smi(module), start)
    gpu_before = gpu.memory()
    gpu_apps = gpu.apps() if params['gpu_holders'] else None

    processes = procfs.snapshot()
    selection = Selection(processes, patterns, params, protection, scope, gpu_apps)
    result = dict(
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
        vmid=params['vmid'],
    )
    gpu.result = result

    def finish(**extra):
        result.update(extra)
        result['elapsed'] = round(time.monotonic() - start, 3)
        return result

    if module.check_mode:
        module.exit_json(**finish())

    outcome = reclaim.terminate(selection.targets, params['signal_timeout'], params['kill_timeout'])
    result['killed'] = outcome.killed
    result['errors'] = outcome.errors
    result['reaped'] = reap_zombies(module, selection, processes, result['errors'])
    result['changed'] = bool(outcome.killed) or bool(result['reaped'])

    if outcome.survivors:
        survivors = ', '.join('%s (%s; %s)' % (p.pid, p.command, reclaim.survivor_hint(procfs.read_process(p.pid) or p))
                              for p in outcome.survivors)
        hint = '' if params['vmid'] is not None else (
            '; if they run in an LXC container, run eagle3.extraction.process_reclaim on the Proxmox hypervisor '
            'with vmid=<the container\'s vmid>')
        module.fail_json(msg='process(es) still alive after SIGKILL and %ss: %s%s'
                         % (params['kill_timeout'], survivors, hint), **finish())

    if params['gpu_memory_max_mib'] is not None:
        gpus, progress = wait_gpu_memory(gpu, params['gpu_memory_max_mib'], params['gpu_wait_timeout'])
        result.update(gpu_memory_after=gpus, gpu_memory_progress=progress)
        over = gpu_memory.over_limit(gpus, params['gpu_memory_max_mib'])
        if over:
            hint = '' if params['vmid'] is not None else (
                '; if the holder is not visible here (inside an LXC container), run '
                'eagle3.extraction.process_reclaim on the Proxmox hypervisor with vmid=<the container\'s vmid>')
            module.fail_json(msg='GPU memory still above gpu_memory_max_mib=%s MiB after %ss: %s%s'
                             % (params['gpu_memory_max_mib'], params['gpu_wait_timeout'],
                                ', '.join('GPU %s uses %s MiB' % (g['index'], g['memory_used_mib']) for g in over),
                                hint),
                             **finish())
    elif gpu_before is not None:
        result['gpu_memory_after'] = gpu.memory()
    module.exit_json(**finish())


if __name__ == '__main__':
    main()
