#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the action plugin server_wait (plugins/action/server_wait.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: server_wait
short_description: Wait for a server's /health on every node of the server, failing it soon when one node dies
version_added: 0.1.0
author:
  - eagle3.extraction maintainers (@eagle3)
description:
  - An action plugin. Run it on every node of the server in one task (the nodes of a server are in one batch).
    On each node it runs M(eagle3.extraction.server_health) a step (O(step)) at a time, which watches that node's
    unit and polls O(url) (rank 0's C(/health) on every node), and posts what it saw on a board on the controller
    that the other nodes of the server read between steps.
  - The wait ends when O(url) answers 200 (RV(state=ready)), when the unit of any node of the server died
    (RV(state=died), on every node, naming the first node that died, its cause and its last log lines) or when
    O(timeout) is spent (RV(state=starting)). It fails unless the server is ready.
  - Rank 0 (the first of O(nodes)) prints a progress line after each step, with the newest log line.
  - With O(start=true) it first enables and starts the unit (M(ansible.builtin.systemd_service)), after clearing its
    failed state, if it has one (M(eagle3.extraction.unit_reset_failed); systemd refuses to start a unit that hit its
    start limit); RV(changed) says whether it did anything. Otherwise it changes nothing.
  - In check mode it reports what the start would change, looks once and does not wait or fail.
options:
  unit:
    description: This node's systemd unit, with its suffix.
    type: str
    required: true
  url:
    description: The server's health URL as this node reaches it (rank 0's on every node).
    type: str
    required: true
  log_file:
    description: This node's server log; only what was written after O(log_offset) is shown.
    type: path
    default: ''
  log_offset:
    description: Size of O(log_file) before the start.
    type: int
    default: 0
  restarts_before:
    description: The unit's C(NRestarts) before the start; more means systemd restarted a server that died.
    type: int
    default: 0
  timeout:
    description: Seconds to wait for 200, 0 to 86400.
    type: int
    required: true
  step:
    description: Seconds of one look on the node, 1 to 3600; a node that died is noticed by the others within a step.
    type: int
    default: 60
  server:
    description: The server's name, for the message; this host's name when empty.
    type: str
    default: ''
  nodes:
    description: The server's nodes in rank order (their inventory names); this host alone when empty.
    type: list
    elements: str
    default: []
  start:
    description: Enable and start the unit before the wait.
    type: bool
    default: false
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.server_health
  - module: eagle3.extraction.unit_reset_failed
  - module: ansible.builtin.systemd_service
  - module: ansible.builtin.wait_for
"""

EXAMPLES = r"""
- name: Start the unit and wait for /health on this node alone
  eagle3.extraction.server_wait:
    unit: sglang-extraction.service
    url: http://127.0.0.1:30000/health
    start: true
    log_offset: "{{ before.log_size }}"
    restarts_before: "{{ before.restarts }}"
    timeout: 3600

- name: Wait for /health on every node of the server, 10 s a step
  eagle3.extraction.server_wait:
    unit: sglang-extraction.service
    url: http://10.200.0.101:30000/health
    log_file: /var/log/sglang/sglang-extraction.log
    log_offset: "{{ before.log_size }}"
    restarts_before: "{{ before.restarts }}"
    timeout: 3600
    step: 10
    server: duo
    nodes: [ct1, ct3]
"""

RETURN = r"""
changed:
  description: Whether O(start=true) cleared the failed state or started or enabled the unit.
  returned: always
  type: bool
state:
  description: V(ready), V(died) (a node of the server died) or V(starting) (the timeout was spent).
  returned: always
  type: str
  sample: ready
died:
  description: The nodes whose unit died, in rank order.
  returned: always
  type: list
  elements: str
waited:
  description: Seconds waited.
  returned: always
  type: int
nodes:
  description: Each node's last look (M(eagle3.extraction.server_health)'s result) as posted.
  returned: always
  type: dict
unit:
  description: This node's unit state in words (the other keys of M(eagle3.extraction.server_health) come too).
  returned: always
  type: str
"""
