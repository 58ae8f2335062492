#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the action plugin inventory_check (plugins/action/inventory_check.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: inventory_check
short_description: Check an inventory's extraction servers before any host is touched
version_added: 0.1.0
author:
  - eagle3.extraction maintainers (@eagle3)
description:
  - Runs on the controller alone (an action plugin), so it contacts no host.
  - Reads, for every host of O(hosts), the variables of the collection's roles that the inventory sets
    (role defaults are not looked at) and checks them against each role's C(meta/argument_specs.yml) with
    Ansible's own argument spec validator (types, choices), then against what that format cannot say
    (ranges, whole-value patterns, paths that are not system directories, no control character in any
    string; the rule of each variable's record, C(plugin_utils/role_variables/<role>.py)).
  - Then the rules across hosts. Every container names a host of O(hypervisors) in C(proxmox_container_node)
    and sets C(proxmox_container_vmid); no two on one node share a vmid, compared as integers (V(471),
    V("471") and V("0471") are one container); C(sglang_server_model_path) is set; the tp-size divides
    C(gpu_check_gpu_count) when both are set.
  - Then the servers (C(plugin_utils/server_layout.py)). Hosts with one C(sglang_server_name) are the nodes of one
    server; their C(sglang_server_node_rank) must cover 0 to N-1 once each; they must agree on the SGLang, patch,
    model and flag variables; the tp-size must be set and be the sum of the nodes' GPUs (the same number on each,
    when C(gpu_check_gpu_count) or a C(proxmox_container_gpus) list says it); rank 0 must listen beyond loopback;
    O(rollout.extract_serial) must be V(100%) (the nodes start together). A container is one host, so it is a
    node of one server only (the vmid rule above).
  - Then extract.yml's rollout variables (O(rollout)).
  - Then how each container is reached. One reached through its hypervisor
    (C(ansible_connection=community.proxmox.proxmox_pct_remote), which runs C(pct exec <proxmox_vmid>) on the node
    it SSHes to) must set C(proxmox_vmid) to its C(proxmox_container_vmid) and C(ansible_host) to its node's
    address, or every task would run in another container (C(plugin_utils/pct_connection.py)). Its C(ansible_host)
    is then not its own address, so rank 0 of a multi-node server reached this way needs C(sglang_server_dist_init_host).
  - Then the online mode's jobs (C(plugin_utils/online_plan.py)), where each has one trainer host naming a host of
    C(mooncake_masters), its servers run one model, the same capture layers and SGLang, no two services of a host
    bind one port, and the master, gateways and trainer are reached at addresses the other hosts reach.
  - Then, for an inventory that passed, each host's plan (C(plugin_utils/host_plan.py), the lookup
    C(eagle3.extraction.host_plan)) in RV(plans); a port or host no address can be made of fails too.
  - Fails once, listing every problem with its host, variable and value (an API key is never shown).
    A variable that refers to a fact set later by a role is skipped here (the role checks it when it starts)
    and listed in RV(unresolved).
options:
  hosts:
    description: The extraction servers.
    type: list
    elements: str
    required: true
  hypervisors:
    description: The Proxmox nodes, the names C(proxmox_container_node) may take.
    type: list
    elements: str
    required: true
  online:
    description:
      - The online mode's hosts by group, C(mooncake_masters) and C(online_trainers) (lists of inventory names).
      - Their values are checked against the roles' specs as the servers' are, and they get a plan too.
    type: dict
    default: {}
  rollout:
    description: extract.yml's variables.
    type: dict
    default: {}
    suboptions:
      extract_serial:
        description: Hosts per batch, a number (1 or more), a percentage (1% to 100%) or a non-empty list of them.
        type: raw
        default: 100%
      extract_max_fail_percentage:
        description: An integer from 0 to 100.
        type: raw
        default: 100
      extract_reclaim:
        description: A boolean.
        type: raw
        default: true
      extract_force:
        description: A boolean.
        type: raw
        default: false
extends_documentation_fragment:
  - eagle3.extraction.controller_check
"""

EXAMPLES = r"""
- name: Check the inventory
  eagle3.extraction.inventory_check:
    hosts: "{{ groups['extraction_servers'] | default([]) }}"
    hypervisors: "{{ groups['proxmox_hypervisors'] | default([]) }}"
    rollout:
      extract_serial: "{{ extract_serial | default('100%') }}"
      extract_max_fail_percentage: "{{ extract_max_fail_percentage | default(100) }}"
"""

RETURN = r"""
hosts:
  description: How many extraction servers were checked.
  returned: always
  type: int
errors:
  description: Every problem found, each naming the host, the variable and its value.
  returned: failed
  type: list
  elements: str
plans:
  description:
    - Per host, its plan, as the roles will have it (role defaults from their argument specs), the lookup
      C(eagle3.extraction.host_plan)'s value, made from the inventory alone.
    - C(server) - C(layout) (C(name), C(nodes) in rank order, C(nnodes), C(rank), C(rank0), C(dist_init_addr)...),
      C(multinode), C(address) (C(port) and C(host), what the server binds (the merged flags); C(client_url), what a
      client on the host calls (loopback for a wildcard bind; rank 0's URL on a node of rank > 0); C(controller_url),
      what the controller calls (null for a server reached through pct that binds no real address); C(rank0);
      C(via), the hypervisor whose pct reaches rank 0, else null), C(url) (the client URL), C(flags) and
      C(environment) as the config file and unit will hold them, C(tp_size), C(local_tp), C(unit), C(dump_dir),
      C(leftover_patterns).
    - C(python), the venv's interpreter; C(job) - C(name), C(shards), C(shard_count), C(dir), C(output_dirs) (by
      shard index), C(server_url), C(dump_dir); C(stamp), the convergence stamp's path.
    - What a fact a role finds later decides (the tp-size by default, the interconnect) is null here, with what is
      made of it (C(local_tp), C(environment)).
    - Empty when the inventory is not valid.
  returned: always
  type: dict
  sample: {ct1: {server: {address: {port: 30000, host: 0.0.0.0, client_url: "http://127.0.0.1:30000",
                                    controller_url: "http://10.200.0.101:30000", rank0: ct1, via: null},
                          url: "http://127.0.0.1:30000", unit: sglang-extraction, dump_dir: /dev/shm/sglang_hs},
                 python: /root/ml-env/bin/python,
                 job: {name: extraction, shards: [0], shard_count: 3, dir: /srv/eagle3-extraction/extraction,
                       server_url: "http://127.0.0.1:30000"},
                 stamp: /var/lib/eagle3-extraction-converged.json}}
unresolved:
  description: C(<host> - <variable>) of the values that refer to facts not set yet, left to the role.
  returned: always
  type: list
  elements: str
dataset_hosts:
  description:
    - The hosts given a dataset (C(extraction_job_dataset) set, or referring to a fact not set yet), in the order of
      O(hosts); extract.yml's dataset play runs on these alone.
  returned: always
  type: list
  elements: str
"""
