# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The words of converged_state's ``differs`` when a host was not compared, which the module (on the host) and
its action plugin (on the controller, plugin_utils/converged_inputs.py) both return."""

from __future__ import annotations

# extract_force (compare=false)
NOT_COMPARED = 'not compared'
# the hypervisor's pct_list answer (listing) does not let it be: pct failed, the node was unreachable or is
# not in this run; or the container is not running
NODE_DID_NOT_ANSWER = 'node did not answer'
NOT_RUNNING = 'not running'
