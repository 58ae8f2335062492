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
  with everything, so ``nan < 0`` lets it through) and in a stated range;
* a Proxmox container id is the one rule in ``vmid_error``.
"""

from __future__ import annotations

import decimal
import math
import os
import re

from ansible.module_utils import basic
from ansible_collections.eagle3.extraction.plugins.module_utils.redact import redact_text

# Proxmox VE guest ids (pve-common's pve-vmid format)
VMID_MIN = 100
VMID_MAX = 999999999

_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


def show(value):
    """A value for a message: repr (so that a newline shows as \\n), secrets redacted, long ones cut."""
    text = redact_text(repr(value))
    return text if len(text) <= 200 else text[:200] + '...'


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


def given_values():
    """The options as the task gave them, before AnsibleModule converted them, or None if unknown.

    The conversion hides what must be refused: int('80\\n') is 80 and float(True) is 1.0, so a
    port with a trailing newline or a timeout of ``true`` would pass every check made after it.
    ansible-core documents _load_params for modules that must see the parameters as given.
    """
    if basic._ANSIBLE_ARGS is None:
        # not run by Ansible (documentation tools import the module): nothing was given
        return None
    try:
        return basic._load_params()
    except Exception:  # pylint: disable=broad-except
        return None


def _crashes_int_conversion(value):
    """Whether ansible-core's int conversion raises something other than its TypeError for value:
    int(Decimal('inf')) raises OverflowError, which AnsibleModule does not catch (a traceback)."""
    if not isinstance(value, str):
        return False
    try:
        int(decimal.Decimal(value))
    except OverflowError:
        return True
    except (decimal.DecimalException, ValueError, TypeError):
        return False
    return False


def strict_module(module_class, argument_spec, **kwargs):
    """module_class(argument_spec=argument_spec, **kwargs) - an AnsibleModule - except that an infinite
    number given for an int option ('inf', '-Infinity') fails cleanly naming the option instead of
    with a traceback."""
    given = given_values() or {}
    bad = []
    for name, spec in argument_spec.items():
        value = given.get(name)
        values = value if isinstance(value, list) and spec.get('type') == 'list' else [value]
        wanted = spec.get('elements') if spec.get('type') == 'list' else spec.get('type')
        if wanted == 'int' and any(_crashes_int_conversion(item) for item in values):
            bad.append(name)
    if not bad:
        return module_class(argument_spec=argument_spec, **kwargs)
    relaxed = dict(argument_spec)
    for name in bad:
        relaxed[name] = dict(argument_spec[name], type='raw')
        relaxed[name].pop('elements', None)
    module = module_class(argument_spec=relaxed, **kwargs)
    module.fail_json(msg='; '.join('%s: %s is not a finite whole number' % (name, show(given[name])) for name in bad))
    return module


def given_errors(params, given, numbers=()):
    """Control characters anywhere in the options as given, and booleans given for numbers.

    ``given`` is given_values() (None: check the converted params); only options of
    ``params`` are looked at; ``numbers`` names the number options (or lists of numbers).
    """
    source = params if given is None else dict((key, value) for key, value in given.items() if key in params)
    errors = control_character_errors(source)
    for name in numbers:
        value = source.get(name)
        converted = params.get(name)
        for index, item in enumerate(value if isinstance(value, list) else [value]):
            # a boolean that survived the conversion is number_error's to report; one turned into 1.0 is ours
            survived = converted[index] if isinstance(converted, list) and index < len(converted) else converted
            if isinstance(item, bool) and not isinstance(survived, bool):
                errors.append('%s: %s is a boolean, not a number' % (name, item))
                break
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
