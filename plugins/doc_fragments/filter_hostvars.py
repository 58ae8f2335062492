# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The options of the filters that read the hosts' variables from the play's hostvars
    (extends_documentation_fragment: eagle3.extraction.filter_hostvars); those whose input is
    the extraction servers add eagle3.extraction.filter_hostvars.extraction_servers."""

    DOCUMENTATION = r'''
options:
  hostvars:
    description: The play's C(hostvars).
    type: dict
    required: true
'''

    EXTRACTION_SERVERS = r'''
options:
  _input:
    description: The extraction servers (C(groups['extraction_servers'])), in inventory order.
    type: list
    elements: str
    required: true
'''
