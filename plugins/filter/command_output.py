# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that read what a command or a kernel file printed, so that no task parses it in Jinja.

- systemd_unit_names: the unit names in ``systemctl list-units --plain --no-legend`` (those that run, with
  running=true: server_probe.unit_running decides).
- proc_devices: the character and block device majors of ``/proc/devices``.
- last_line: the last line that is not blank, what a failing program said last.
- pip_would_install: the distributions ``pip install --dry-run`` would install.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_devices import parse_proc_devices
from ansible_collections.eagle3.extraction.plugins.module_utils.server_probe import unit_running
from ansible_collections.eagle3.extraction.plugins.plugin_utils.printed_text import printed_text


def _text(value, name):
    try:
        return printed_text(value, name)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def systemd_unit_names(stdout, running=False):
    """The first column of each line of ``systemctl list-units --plain --no-legend``: the unit names,
    in systemctl's order. A leading status mark (a bullet systemctl prints without --plain) is skipped.
    With ``running``, only the units whose ACTIVE column (the third: UNIT LOAD ACTIVE SUB) says they
    run, as server_probe.unit_running decides for every unit the collection reads."""
    names = []
    for line in _text(stdout, 'systemd_unit_names').splitlines():
        words = line.split()
        if words and not words[0][0].isalnum():
            words = words[1:]
        if words and (not running or (len(words) > 2 and unit_running(words[2]))):
            names.append(words[0])
    return names


def proc_devices(text):
    """``/proc/devices`` as ``{'character': {name: major}, 'block': {name: major}}``; a name listed twice
    keeps its first major. Lines that are not ``<major> <name>`` are skipped."""
    return parse_proc_devices(_text(text, 'proc_devices'))


def last_line(text):
    """The last line of ``text`` that is not blank, stripped; ``''`` when there is none."""
    lines = [line.strip() for line in _text(text, 'last_line').splitlines() if line.strip()]
    return lines[-1] if lines else ''


def pip_would_install(stdout):
    """The ``<name>-<version>`` words of pip's ``Would install ...`` line (``pip install --dry-run``), in pip's
    order; ``[]`` when pip would install nothing (it prints no such line)."""
    found = []
    for line in _text(stdout, 'pip_would_install').splitlines():
        if line.startswith('Would install '):
            found.extend(line[len('Would install '):].split())
    return found


class FilterModule(object):
    def filters(self):
        return {'systemd_unit_names': systemd_unit_names, 'proc_devices': proc_devices, 'last_line': last_line,
                'pip_would_install': pip_would_install}
