# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks every module runs on its options before it reads or changes anything.

Each check returns a message that names the option and its value, or None when the value
is fine; a module collects them and fails once with all of them. The rules:

* whole values: patterns are matched with ``re.fullmatch``, never ``$`` (which matches
  before a trailing newline), and no option value holds a control character (a newline in a
  value written to a config file or put on a command line splits it in two);
* numbers are of their type (``true`` is not the port 1), finite (``nan`` compares false
  with everything, so ``nan < 0`` lets it through) and in a stated range; a number option's type
  is raw (number_option), so that the module sees it as the task gave it, through AnsibleModule's
  params and nothing private of ansible-core, and convert_numbers converts it;
* a Proxmox container id is the one rule in ``vmid_error``.
"""

from __future__ import annotations

import math
import os
import re

from ansible_collections.eagle3.extraction.plugins.module_utils.redact import redact_text

# Proxmox VE guest ids (pve-common's pve-vmid format)
VMID_MIN = 100
VMID_MAX = 999999999

_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


def show(value):
    """A value for a message: repr (so that a newline shows as \\n), secrets redacted, long ones cut."""
    text = redact_text(repr(value))
    return text if len(text) <= 200 else text[:200] + '...'


def inventory_int(value, digits):
    """An integer as an inventory may write it: an int, or a string of at most ``digits`` digits ("471",
    "0471"); None for anything else (a bool, a float, a sign, a word)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r'[0-9]{1,%d}' % digits, value):
        return int(value)
    return None


def inventory_vmid(value):
    """A container ID as an inventory may write it (inventory_int, as many digits as VMID_MAX has), or None; its
    range is vmid_error's."""
    return inventory_int(value, len(str(VMID_MAX)))


def _strings(value, where):
    """(where, string) for every string in value, walking lists and dicts (keys too)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, where)
            yield from _strings(item, '%s.%s' % (where, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings(item, '%s[%d]' % (where, index))


def control_character_errors(params, names=None):
    """A message for every option (of ``names``, default all) with a control character anywhere in it."""
    errors = []
    for name in sorted(params if names is None else names):
        if name.startswith('_'):
            continue
        for where, text in _strings(params.get(name), name):
            if _CONTROL.search(text):
                errors.append('%s: %s holds a control character (newline, tab, ...); give the value on one line '
                              'without them' % (where, show(text)))
                break
    return errors


# a number as a task may give it in a string ('8000' from a template): whole, no sign but -, no blank
INTEGER_TEXT = re.compile(r'-?[0-9]{1,18}')
DECIMAL_TEXT = re.compile(r'-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]{1,3})?')


def number_option(kind, **spec):
    """The argument spec of a number option (kind 'int' or 'float'; 'list' with elements=kind for a list).

    Its type is raw, so that AnsibleModule hands the value over as the task gave it and
    convert_numbers converts it: ansible-core's own conversion takes int('80\\n') for 80 and
    float(True) for 1.0, and raises OverflowError (a traceback) on 'inf' for an int. The option's
    documentation says type raw and, in words, which number it takes.
    """
    if spec.get('type') == 'list':
        return dict(spec, elements='raw')
    return dict(spec, type='raw')


def _number(value, kind):
    """(value as a number of kind, None) or (None, why not)."""
    if isinstance(value, bool):
        return None, 'a boolean, not a number'
    if isinstance(value, str):
        if not (INTEGER_TEXT if kind == 'int' else DECIMAL_TEXT).fullmatch(value):
            return None, 'not %s' % ('a whole number' if kind == 'int' else 'a number')
        value = int(value) if kind == 'int' else float(value)
    if not isinstance(value, (int, float)):
        return None, 'not a number'
    if kind == 'int':
        if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
            return None, 'not a whole number'
        return int(value), None
    # a float option holds a float, as ansible-core's conversion gave it (-1 shows as -1.0)
    return float(value), None


def convert_numbers(params, kinds):
    """Each number option of ``kinds`` ({name: 'int' or 'float'}) in ``params`` (a module's params,
    given as the task gave them: number_option) replaced by its number; a message for each that is
    none (a boolean, a string with a newline, 'inf' for an int, a fraction for an int), whose value
    then becomes None (a list []) so that no later check reports it again. A list option holds numbers
    each."""
    errors = []
    for name in sorted(kinds):
        value = params.get(name)
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        converted = []
        for index, item in enumerate(items):
            number, why = _number(item, kinds[name])
            if why:
                where = '%s[%d]' % (name, index) if isinstance(value, list) else name
                errors.append('%s: %s is %s' % (where, show(item), why))
                params[name] = [] if isinstance(value, list) else None
                break
            converted.append(number)
        else:
            params[name] = converted if isinstance(value, list) else converted[0]
    return errors


def option_value_errors(params, numbers):
    """convert_numbers for the number options (``numbers``: {name: kind}), then a control character in
    any other option: the first checks every module runs on its params."""
    errors = convert_numbers(params, numbers)
    errors.extend(control_character_errors(params, [name for name in params if name not in numbers]))
    return errors


def number_error(name, value, minimum, maximum, unit=''):
    """None if value is a finite int/float (not a bool) with minimum <= value <= maximum."""
    if value is None:
        return None
    unit = ' ' + unit if unit else ''
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return '%s: %s is not a number; give a number from %s to %s%s' % (name, show(value), minimum, maximum, unit)
    if not math.isfinite(value):
        return '%s: %s is not a finite number; give a number from %s to %s%s' % (name, value, minimum, maximum, unit)
    if not minimum <= value <= maximum:
        return '%s: %s is out of range; give a number from %s to %s%s' % (name, value, minimum, maximum, unit)
    return None


def number_errors(params, ranges):
    """number_error for each option of ranges: {name: (minimum, maximum, unit)}."""
    errors = []
    for name, (minimum, maximum, unit) in ranges.items():
        error = number_error(name, params.get(name), minimum, maximum, unit)
        if error:
            errors.append(error)
    return errors


def vmid_error(vmid, name='vmid'):
    """The one rule for a Proxmox container id: an integer from 100 to 999999999."""
    if vmid is None:
        return None
    if isinstance(vmid, bool) or not isinstance(vmid, int) or not VMID_MIN <= vmid <= VMID_MAX:
        return '%s: %s is not a Proxmox container id; give an integer from %d to %d' % (
            name, show(vmid), VMID_MIN, VMID_MAX)
    return None


def fullmatch_error(name, value, pattern, what):
    """None if the whole of value matches pattern (a compiled regex), else a message saying what is wanted."""
    if value is None or (isinstance(value, str) and pattern.fullmatch(value)):
        return None
    return '%s: %s is not %s' % (name, show(value), what)


def executable_file_error(name, path):
    """None if path is an absolute path to an executable regular file; else what it is instead."""
    if path is None:
        return None
    if not os.path.isabs(path):
        return '%s: %s is not an absolute path' % (name, show(path))
    if os.path.isdir(path):
        return '%s: %s is a directory, not an executable file' % (name, show(path))
    if not os.path.exists(path):
        return '%s: %s does not exist' % (name, show(path))
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return '%s: %s is not an executable file' % (name, show(path))
    return None
