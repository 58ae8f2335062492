# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a command or a kernel file printed, as text: the input of the filters that read it
(filter/command_output.py, filter/nvidia_device_nodes.py)."""

from __future__ import annotations


def printed_text(value, name):
    """value (a task's stdout) as text, bytes decoded as UTF-8; ValueError naming the filter ``name`` when it is
    neither."""
    if isinstance(value, bytes):
        value = value.decode('utf-8', 'replace')
    if not isinstance(value, str):
        raise ValueError('%s: the input must be the text the command printed (stdout)' % name)
    return value
