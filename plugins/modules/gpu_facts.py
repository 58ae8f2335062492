#!/usr/bin/python
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: NVIDIA driver, GPUs, GPU processes and interconnect as facts
description:
  - Runs C(nvidia-smi) (its plain summary, two CSV queries with C(--format=csv,noheader,nounits) and
    C(nvidia-smi topo -m)) and reads C(/proc/driver/nvidia/version), and returns what they say as
    C(ansible_facts.nvidia) - the driver, nvidia-smi and CUDA versions, every GPU with its memory, persistence
    mode and PCI bus id, the compute processes on the GPUs, the link between each pair of GPUs and whether
    the GPUs are joined by NVLink or only by PCIe.
  - Reads only; it never changes the GPUs or the driver.
  - A broken driver fails the task with the cause and what to do about it - the driver/library version
    mismatch (nvidia-smi exit code 18), a driver that is not loaded or not reachable (exit code 9) and a
    missing nvidia-smi; the result's RV(cause) names which.
  - In an LXC container the kernel module is the hypervisor's; run the module there with
    O(query_gpus=false) (delegated) to read the version the container's user-space driver must match.
version_added: 0.1.0
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  nvidia_smi_path:
    description:
      - Absolute path of the C(nvidia-smi) binary.
      - When not set, C(nvidia-smi) is looked up on E(PATH), then in C(/usr/bin), C(/usr/local/bin), C(/usr/sbin),
        C(/sbin) and C(/usr/local/nvidia/bin).
    type: path
  command_timeout:
    description:
      - Seconds each C(nvidia-smi) call may take, 1 to 600. A wedged driver makes nvidia-smi hang; it is then killed
        and the module fails with RV(cause) V(timeout), naming the command and the timeout.
    type: raw
    default: 30
  query_gpus:
    description:
      - Run C(nvidia-smi) and report the GPUs.
      - V(false) only reads the loaded kernel module's version from C(/proc/driver/nvidia/version) and
        fails if there is none; meant for a hypervisor, where only the module matters.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: Reads only, so check mode runs it unchanged.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: linux
requirements:
  - The NVIDIA user-space driver (C(nvidia-smi)) on the target, unless O(query_gpus=false).
notes:
  - V(changed) is always V(false).
  - nvidia-smi run in an LXC or Docker container may list no compute process although memory is used - the
    holder lives in another PID namespace. Memory used on each GPU is reported either way.
seealso:
  - module: eagle3.extraction.process_reclaim
    description: Kill the processes that hold the GPUs.
"""

EXAMPLES = r"""
- name: Read the GPUs
  eagle3.extraction.gpu_facts:

- name: Fail unless every GPU is empty
  ansible.builtin.assert:
    that: ansible_facts['nvidia']['gpus'] | map(attribute='memory_used_mib') | max == 0
    fail_msg: "{{ ansible_facts['nvidia']['gpus'] | map(attribute='memory_used_mib') | list }}"

- name: Read the kernel module version on the container's Proxmox hypervisor
  eagle3.extraction.gpu_facts:
    query_gpus: false
  delegate_to: "{{ proxmox_container_node }}"
  delegate_facts: true

- name: Compare the container's driver with the hypervisor's module
  ansible.builtin.assert:
    that: >-
      hostvars[proxmox_container_node]['ansible_facts']['nvidia']['kernel_module']['version']
      == ansible_facts['nvidia']['driver_version']

- name: Use a driver installed outside PATH
  eagle3.extraction.gpu_facts:
    nvidia_smi_path: /opt/nvidia/bin/nvidia-smi
"""

RETURN = r"""
cause:
  description:
    - Why the module failed - V(driver_library_mismatch), V(driver_not_loaded), V(missing_binary),
      V(timeout) (nvidia-smi did not answer within O(command_timeout)), V(invalid_option) (a bad option value),
      V(invalid_field) (a driver that does not know a queried field), V(no_kernel_module) (no
      C(/proc/driver/nvidia/version) with O(query_gpus=false)), V(unparsable) (output this module cannot
      read) or V(failed) (any other nvidia-smi error, its output in the message).
  returned: failure
  type: str
  sample: driver_library_mismatch
ansible_facts:
  description: Facts to add to the host's ansible_facts.
  returned: always
  type: complex
  contains:
    nvidia:
      description: What nvidia-smi and the kernel module report.
      returned: always
      type: complex
      contains:
        nvidia_smi_path:
          description: The nvidia-smi that was run; V(null) with O(query_gpus=false).
          returned: always
          type: str
          sample: /usr/bin/nvidia-smi
        nvidia_smi_version:
          description: Version of nvidia-smi itself, the user-space driver's.
          returned: when O(query_gpus=true)
          type: str
          sample: 580.159.04
        driver_version:
          description: Version of the driver NVML talks to, as nvidia-smi reports it.
          returned: when O(query_gpus=true)
          type: str
          sample: 580.159.04
        cuda_version:
          description: Highest CUDA version the driver supports (V(null) if nvidia-smi prints none).
          returned: when O(query_gpus=true)
          type: str
          sample: '13.0'
        kernel_module:
          description:
            - The loaded kernel module, from C(/proc/driver/nvidia/version); V(null) where that file
              does not exist or cannot be read (in a container it is the hypervisor's module).
          returned: always
          type: dict
          contains:
            version:
              description: Module version.
              type: str
              sample: 580.159.04
            flavor:
              description: V(open) or V(proprietary) kernel module.
              type: str
              sample: open
            description:
              description: The module's own description, before the version.
              type: str
              sample: NVIDIA UNIX Open Kernel Module for x86_64
        gpu_count:
          description: Number of GPUs nvidia-smi sees.
          returned: when O(query_gpus=true)
          type: int
          sample: 2
        summary:
          description: The GPUs in a few words, for a report - their count and the first GPU's name, V(-) for none.
          returned: when O(query_gpus=true)
          type: str
          sample: 2 x NVIDIA H200
        gpus:
          description: Every GPU, by index.
          returned: when O(query_gpus=true)
          type: list
          elements: dict
          contains:
            index:
              description: nvidia-smi's GPU index.
              type: int
              sample: 0
            uuid:
              description: GPU UUID.
              type: str
              sample: GPU-c78b0a93-9298-0633-b6f0-dd3c6ad32227
            name:
              description: Product name.
              type: str
              sample: NVIDIA H200
            memory_total_mib:
              description: Memory in MiB.
              type: int
              sample: 143771
            memory_used_mib:
              description: Memory used in MiB, by any process, seen from here or not.
              type: int
              sample: 0
            persistence_mode:
              description: V(Enabled) or V(Disabled) (V(null) where the GPU does not report it).
              type: str
              sample: Enabled
            pci_bus_id:
              description: PCI bus id.
              type: str
              sample: 00000000:00:06.0
        processes:
          description: Compute processes on the GPUs, one entry a process and GPU.
          returned: when O(query_gpus=true)
          type: list
          elements: dict
          contains:
            pid:
              description: Process id as NVML reports it.
              type: int
              sample: 592
            process_name:
              description: Process name as nvidia-smi shows it.
              type: str
              sample: python3
            used_memory_mib:
              description: Memory it holds on this GPU in MiB (V(null) where not reported).
              type: int
              sample: 20998
            gpu_uuid:
              description: UUID of the GPU.
              type: str
              sample: GPU-c78b0a93-9298-0633-b6f0-dd3c6ad32227
            gpu_index:
              description: Index of the GPU.
              type: int
              sample: 0
        topology:
          description: The link between each pair of GPUs, from C(nvidia-smi topo -m).
          returned: when O(query_gpus=true)
          type: list
          elements: dict
          contains:
            gpus:
              description: The two GPU indexes.
              type: list
              elements: int
              sample: [0, 1]
            link:
              description: The cell of C(topo -m), for example V(NV18), V(PIX), V(SYS).
              type: str
              sample: NV18
            type:
              description: V(nvlink), V(pcie) or V(unknown).
              type: str
              sample: nvlink
            nvlinks:
              description: Number of bonded NVLinks (0 when not NVLink).
              type: int
              sample: 18
        interconnect:
          description:
            - V(nvlink) when there are at least two GPUs and every pair is joined by NVLink, else V(pcie)
              (a single GPU included).
          returned: when O(query_gpus=true)
          type: str
          sample: nvlink
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils import nvidia_smi_runner
from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_smi import (
    COMPUTE_APP_FIELDS,
    GPU_FIELDS,
    NvidiaSmiError,
    gpus_summary,
    parse_compute_apps,
    parse_gpus,
    parse_proc_version,
    parse_summary_versions,
    parse_topology,
)
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import (
    number_error, number_option, option_value_errors, show)

PROC_VERSION = '/proc/driver/nvidia/version'
# the most seconds one nvidia-smi call may be given
MAX_COMMAND_TIMEOUT = 600


def read_kernel_module():
    """The loaded module from /proc/driver/nvidia/version, or None where there is none."""
    try:
        with open(PROC_VERSION) as version_file:
            text = version_file.read()
    except (IOError, OSError):
        return None
    try:
        return parse_proc_version(text)
    except ValueError:
        return None


def validate(params):
    """Messages for bad option values, each naming the option and its value.

    The numbers of ``params`` (as the task gave them) are converted in place."""
    errors = option_value_errors(params, {'command_timeout': 'float'})
    error = number_error('command_timeout', params['command_timeout'], 1, MAX_COMMAND_TIMEOUT, 'seconds')
    if error:
        errors.append(error)
    path = params['nvidia_smi_path']
    if path is not None and not os.path.isabs(path):
        errors.append('nvidia_smi_path: %s is not an absolute path' % show(path))
    return errors


def checked(call, *args):
    """call(*args) (a NvidiaSmi query or run); a driver that is not loaded gets the device nodes seen here."""
    try:
        return call(*args)
    except NvidiaSmiError as error:
        if error.cause == 'driver_not_loaded':
            nodes = sorted(os.path.basename(node) for node in glob.glob('/dev/nvidia*'))
            error.message += ' Device nodes here: %s.' % (', '.join(nodes) or 'none')
        raise error


def parsed(parser, text, what):
    try:
        return parser(text)
    except ValueError as exc:
        raise NvidiaSmiError('unparsable', 'Cannot read the output of %s: %s. Output: %r' % (what, exc, text))


def gather(module, kernel_module):
    version = kernel_module and kernel_module['version']
    path = nvidia_smi_runner.find(module, module.params['nvidia_smi_path'], version)
    smi = nvidia_smi_runner.NvidiaSmi(path, timeout=module.params['command_timeout'], kernel_module_version=version)
    facts = {'nvidia_smi_path': path, 'kernel_module': kernel_module}

    facts.update(parsed(parse_summary_versions, checked(smi.output, []), 'nvidia-smi'))

    gpus = parsed(parse_gpus, checked(smi.query, 'gpu', GPU_FIELDS), 'nvidia-smi --query-gpu')
    gpus.sort(key=lambda gpu: gpu['index'])
    for gpu in gpus:
        # the summary already has it, and it is one driver for all GPUs
        gpu.pop('driver_version', None)
    facts['gpus'] = gpus
    facts['gpu_count'] = len(gpus)
    facts['summary'] = gpus_summary(gpus)

    processes = parsed(parse_compute_apps, checked(smi.query, 'compute-apps', COMPUTE_APP_FIELDS),
                       'nvidia-smi --query-compute-apps')
    index_of = dict((gpu['uuid'], gpu['index']) for gpu in gpus)
    for process in processes:
        process['gpu_index'] = index_of.get(process['gpu_uuid'])
    facts['processes'] = processes

    topology = parsed(parse_topology, checked(smi.output, ['topo', '-m']), 'nvidia-smi topo -m')
    facts['topology'] = topology['pairs']
    facts['interconnect'] = topology['interconnect']
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type='path'),
            query_gpus=dict(type='bool', default=True),
            command_timeout=number_option('float', default=nvidia_smi_runner.DEFAULT_TIMEOUT),
        ),
        supports_check_mode=True,
    )
    errors = validate(module.params)
    if errors:
        module.fail_json(msg='; '.join(errors), cause='invalid_option')
    kernel_module = read_kernel_module()
    try:
        if module.params['query_gpus']:
            facts = gather(module, kernel_module)
        elif kernel_module is None:
            raise NvidiaSmiError('no_kernel_module', 'No NVIDIA kernel module is loaded here (%s is missing or '
                                 'unreadable). Load it (modprobe nvidia) and check with nvidia-smi.' % PROC_VERSION)
        else:
            facts = {'nvidia_smi_path': None, 'kernel_module': kernel_module}
    except NvidiaSmiError as error:
        module.fail_json(msg=error.message, cause=error.cause)
    module.exit_json(changed=False, ansible_facts={'nvidia': facts})


if __name__ == '__main__':
    main()
