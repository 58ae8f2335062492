# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The unit option of the modules that read or act on one systemd service unit, server_health and
    unit_reset_failed (each validates it whole with module_utils/server_probe.py's UNIT_NAME)."""

    DOCUMENTATION = r'''
options:
  unit:
    description:
      - The systemd unit, with its suffix (V(sglang-extraction.service)).
    type: str
    required: true
'''
