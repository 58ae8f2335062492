# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The attributes of a module that runs on Linux, supports check mode fully and has no diff
    (extends_documentation_fragment: eagle3.extraction.attributes)."""

    DOCUMENTATION = r'''
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
'''

    # A module whose action plugin does the work from the controller (copy_tree, pct_list), run once a host
    # (extends_documentation_fragment: eagle3.extraction.attributes.action, after ansible.builtin.action_common_attributes
    # and its .flow, which describe each attribute)
    ACTION = r'''
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
'''
