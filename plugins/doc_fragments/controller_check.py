# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The attributes of an action that only reads variables on the controller
    (extends_documentation_fragment: eagle3.extraction.controller_check)."""

    DOCUMENTATION = r'''
attributes:
  action:
    support: full
    description: An action plugin, run on the controller; no module is sent to the host.
  check_mode:
    support: full
    description: It only reads, so it checks in check mode as it does otherwise.
  diff_mode:
    support: none
    description: It changes nothing.
  platform:
    support: full
    platforms: all
    description: Runs on the controller.
'''
