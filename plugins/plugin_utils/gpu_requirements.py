# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_check's requirements over what gpu_facts read (the action plugin gpu_requirements): each
message names the host, the GPU, the figure found and the variable that sets the limit."""

from __future__ import annotations

import json

from ansible.module_utils.compat.version import LooseVersion

from ansible_collections.eagle3.extraction.plugins.plugin_utils.gpu_text import gpus_text, processes_text


def _indexes(gpus):
    return ', '.join(str(gpu.get('index')) for gpu in gpus)


def _hypervisor_problems(host, nvidia, hypervisor, hypervisor_result):
    module = ((hypervisor_result or {}).get('ansible_facts') or {}).get('nvidia', {}).get('kernel_module') or {}
    version = module.get('version') or ''
    if not version:
        return ['Hypervisor %s (gpu_check_hypervisor) of %s: %s'
                % (hypervisor, host, ((hypervisor_result or {}).get('msg') or 'no kernel module version').strip())]
    if nvidia.get('driver_version') == version and nvidia.get('nvidia_smi_version') == version:
        return []
    return ['GPUs %s of %s run driver %s with nvidia-smi %s, but its hypervisor %s (gpu_check_hypervisor) has kernel '
            'module %s. Install exactly %s in the container (the .run installer with --no-kernel-module).'
            % (_indexes(nvidia.get('gpus', [])), host, nvidia.get('driver_version'), nvidia.get('nvidia_smi_version'),
               hypervisor, version, version)]


def _idle_problems(host, nvidia, req):
    gpus, processes = nvidia.get('gpus', []), nvidia.get('processes', [])
    reclaimed, reclaim = req.get('reclaimed') or {}, req.get('reclaim', False)
    problems = []
    for gpu in gpus:
        used = gpu.get('memory_used_mib')
        if used is not None and used <= req['memory_used_max_mib']:
            continue
        holders = [p for p in processes if p.get('gpu_index') == gpu.get('index')]
        text = ('GPU %s (%s) of %s has %s MiB in use; gpu_check_memory_used_max_mib is %s.'
                % (gpu.get('index'), gpu.get('uuid'), host, used if used is not None else 'an unreported amount of',
                   req['memory_used_max_mib']))
        if holders:
            text += ' Held by %s.' % processes_text(holders)
        else:
            text += (' No compute process is visible from here: the holder may be in another PID namespace; reclaim'
                     ' it from the hypervisor (eagle3.extraction.process_reclaim with vmid).')
        if reclaimed.get('msg'):
            text += ' The reclaim (gpu_check_reclaim) reported: %s' % reclaimed['msg']
        elif not reclaim:
            text += ' gpu_check_reclaim: true kills the holders first.'
        problems.append(text)
    if processes:
        problems.append('No compute process may run on the GPUs of %s: %s.%s'
                        % (host, processes_text(processes, True),
                           '' if reclaim else ' gpu_check_reclaim: true kills them first.'))
    return problems


def reclaim_simulated(reclaimed):
    """A reclaim in check mode (PIDs it would kill, none killed) freed nothing: the memory and process
    checks are left out, as a real run would have reclaimed first."""
    reclaimed = reclaimed or {}
    return bool(reclaimed.get('would_kill')) and not reclaimed.get('killed')


def gpu_problems(host, nvidia, req):
    """Every requirement of ``req`` (gpu_check's variables, without the prefix) that the GPUs ``nvidia``
    (gpu_facts' ``ansible_facts.nvidia``) of ``host`` do not meet, one message each, in the order the role
    documents: a GPU at all, the driver's pin, minimum and hypervisor, the count, each GPU's model and
    persistence mode, then (with ``require_idle``) each GPU's memory in use and the compute processes."""
    gpus = nvidia.get('gpus') or []
    if not nvidia.get('gpu_count'):
        return ['nvidia-smi on %s lists no GPU. Check that the /dev/nvidia* device nodes are passed into the container '
                '(eagle3.extraction.proxmox_container).' % host]
    problems = []
    driver = nvidia.get('driver_version')
    if req.get('driver_version') and driver != req['driver_version']:
        problems.append('GPUs %s of %s run driver %s; gpu_check_driver_version pins %s.'
                        % (_indexes(gpus), host, driver, req['driver_version']))
    if req.get('driver_version_min') and LooseVersion(str(driver)) < LooseVersion(str(req['driver_version_min'])):
        problems.append('GPUs %s of %s run driver %s; gpu_check_driver_version_min is %s.'
                        % (_indexes(gpus), host, driver, req['driver_version_min']))
    if req.get('hypervisor'):
        problems.extend(_hypervisor_problems(host, nvidia, req['hypervisor'], req.get('hypervisor_result')))
    if req.get('gpu_count') and nvidia['gpu_count'] != req['gpu_count']:
        problems.append('%s has %s GPU(s) (%s); gpu_check_gpu_count is %s. Check that every /dev/nvidiaN is passed '
                        'into the container.' % (host, nvidia['gpu_count'], gpus_text(gpus), req['gpu_count']))
    if req.get('gpu_model'):
        problems.extend('GPU %s (%s) of %s is %s; gpu_check_gpu_model is %s.'
                        % (gpu.get('index'), gpu.get('uuid'), host, json.dumps(gpu.get('name')),
                           json.dumps(req['gpu_model']))
                        for gpu in gpus if gpu.get('name') != req['gpu_model'])
    if req.get('persistence_mode'):
        problems.extend('GPU %s (%s) of %s has persistence mode %s; gpu_check_persistence_mode requires Enabled. '
                        'Enable it on the hypervisor (nvidia-smi -pm 1, or the nvidia-persistenced service).'
                        % (gpu.get('index'), gpu.get('uuid'), host, gpu.get('persistence_mode') or 'unknown')
                        for gpu in gpus if gpu.get('persistence_mode') != 'Enabled')
    if req.get('require_idle') and not reclaim_simulated(req.get('reclaimed')):
        problems.extend(_idle_problems(host, nvidia, req))
    return problems
