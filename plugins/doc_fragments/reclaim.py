# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The options and notes port_reclaim and process_reclaim share (their argument spec is
    module_utils/reclaim.py's common_argument_spec); their attributes are eagle3.extraction.attributes."""

    DOCUMENTATION = r'''
options:
  signal_timeout:
    description:
      - Seconds to wait after C(SIGTERM) before sending C(SIGKILL) to the processes still running, 0 to 3600.
    type: raw
    default: 10
  kill_timeout:
    description:
      - Seconds to wait after C(SIGKILL) for the processes to exit (and their zombies to be reaped) before giving up,
        0 to 3600.
    type: raw
    default: 10
  command_timeout:
    description:
      - Seconds each external command this module runs (C(pct), C(lxc-info), C(nvidia-smi)) may take, 1 to 600.
        A command still running then is killed and the module fails, naming the command and the timeout.
    type: raw
    default: 60
  vmid:
    description:
      - Proxmox VE id of an LXC container (100 to 999999999). The module must then run on the container's
        hypervisor (use C(delegate_to)) and only ever signals processes of that container, by host PID, including
        those that cannot be seen or signalled from inside it. A container that is not running is an error.
      - A process belongs to the container when it shares the PID namespace of the container's init (found with
        C(pct status <vmid> --verbose), falling back to C(lxc-info -n <vmid> -p)), sits in the container's cgroup
        (C(lxc.payload.<vmid>) or C(/lxc/<vmid>/)), or lives in the container's network namespace (unless the
        container shares the host's network).
    type: raw
notes:
  - Never signals PID 1, the module's own process or its ancestors (the SSH session and shell Ansible runs in),
    kernel threads, or the init of a PID namespace (a container's PID 1).
  - Command lines in the result and in messages have the values of C(--api-key), C(--admin-api-key) and of any
    flag or variable named like a token, password, secret or key replaced by C(<redacted>).
  - Every option is checked before anything is read or signalled; a bad value fails naming the option and the value.
'''
