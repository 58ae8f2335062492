# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that render the SGLang server's config file and its systemd unit's values.

The unit's command line holds only ``python -m <module> --config <file>``: every flag and
the API key go to a root-only YAML file that SGLang's ``--config`` reads (its
ConfigArgumentMerger turns each key into ``--key value``). Every value is checked whole
here, so that no newline or control character reaches the file or the unit, and a bad
value fails naming its variable.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import re
import unicodedata

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

# The four flags every server has come from variables of their own.
FLAG_VARIABLES = {
    'model-path': 'sglang_server_model_path',
    'host': 'sglang_server_host',
    'port': 'sglang_server_port',
    'tp-size': 'sglang_server_tp_size',
}
FLAG_NAME = re.compile(r'[a-z0-9][a-z0-9-]*\Z')
ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')
# Flags that must not be set through the flags: the key has its own variable (kept out of
# every message), and a second --config would make SGLang refuse to start.
RESERVED_FLAGS = {
    'api-key': 'set sglang_server_api_key instead',
    'admin-api-key': 'not supported: it would be printed with the flags',
    'config': 'the role passes the config file itself',
    # SGLang's --config refuses deprecated flags ("Unsupported config option"); these two
    # per-phase flags are what --disable-cuda-graph stands for in 0.5.14 and later
    'disable-cuda-graph': "SGLang's --config refuses this deprecated flag: set disable-prefill-cuda-graph: true "
                          "and disable-decode-cuda-graph: true (the same)",
}
# What no value may hold: C0/C1 controls (newline, tab, escape, NEL), format characters,
# surrogates, unassigned code points and the Unicode line and paragraph separators (YAML
# reads those as line breaks).
BAD_CATEGORIES = ('Cc', 'Cf', 'Cs', 'Co', 'Cn', 'Zl', 'Zp')


def bad_character(text):
    """The first character of text that no file or command line may hold, or None."""
    for char in text:
        if unicodedata.category(char) in BAD_CATEGORIES:
            return char
    return None


def flag_variable(key):
    if key in FLAG_VARIABLES:
        return "%s (or sglang_server_flags['%s'])" % (FLAG_VARIABLES[key], key)
    return "sglang_server_flags['%s']" % key


def check_text(text, variable, show=True):
    char = bad_character(text)
    if char is not None:
        raise AnsibleFilterError('%s=%s holds the control character %r; a value must be one line of printable text'
                                 % (variable, repr(text) if show else '(hidden)', char))


def check_value(value, variable):
    """A flag's value as the config file holds it; fails naming the variable."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        check_text(to_text(value), variable)
        return to_text(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AnsibleFilterError('%s=%r is not a finite number' % (variable, value))
        return value
    if isinstance(value, (list, tuple)):
        items = []
        for index, item in enumerate(value):
            if isinstance(item, (list, tuple, dict)) or item is None:
                raise AnsibleFilterError('%s[%d]=%r: a list holds strings or numbers' % (variable, index, item))
            items.append(check_value(item, '%s[%d]' % (variable, index)))
        return items
    if isinstance(value, dict):
        checked = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise AnsibleFilterError('%s has the key %r; keys are strings' % (variable, key))
            check_text(to_text(key), '%s key' % variable)
            checked[to_text(key)] = check_value(item, "%s['%s']" % (variable, key))
        return checked
    raise AnsibleFilterError('%s=%r is a %s; a flag takes a string, number, boolean, list or dict'
                             % (variable, value, type(value).__name__))


def check_flag_name(key, variable):
    if not isinstance(key, str) or not FLAG_NAME.match(key):
        raise AnsibleFilterError('%s has the flag %r; a flag is its long name without --, lower-case letters, digits '
                                 'and -, for example mem-fraction-static' % (variable, key))
    if key in RESERVED_FLAGS:
        raise AnsibleFilterError("%s has the flag '%s': %s" % (variable, key, RESERVED_FLAGS[key]))


def parse_extra_args(extra_args):
    """--key value ... tokens to {key: value}: no value is true, several a list."""
    if extra_args is None:
        return {}
    if isinstance(extra_args, str) or not isinstance(extra_args, (list, tuple)):
        raise AnsibleFilterError('sglang_server_extra_args=%r is not a list of strings' % (extra_args,))
    parsed = {}
    key = None
    for index, token in enumerate(extra_args):
        variable = 'sglang_server_extra_args[%d]' % index
        if not isinstance(token, str):
            raise AnsibleFilterError('%s=%r is not a string' % (variable, token))
        token = to_text(token)
        check_text(token, variable)
        if token.startswith('--'):
            key, sep, value = token[2:].partition('=')
            check_flag_name(key, variable)
            parsed[key] = [value] if sep else []
        elif key is None:
            raise AnsibleFilterError('%s=%r comes before any --flag' % (variable, token))
        else:
            parsed[key].append(token)
    return dict((k, True if not v else v[0] if len(v) == 1 else v) for k, v in parsed.items())


def sglang_server_config(flags, api_key='', extra_args=None):
    """The config file's text: {flag: value} as JSON, the key under api-key."""
    if not isinstance(flags, dict):
        raise AnsibleFilterError('sglang_server_flags=%r is not a dict' % (flags,))
    config = {}
    for key, value in flags.items():
        check_flag_name(key, 'sglang_server_flags')
        value = check_value(value, flag_variable(key))
        if value is None or value is False or value == []:
            continue
        config[key] = value
    for key, value in parse_extra_args(extra_args).items():
        config[key] = check_value(value, 'sglang_server_extra_args (--%s)' % key)
    if api_key is None:
        api_key = ''
    if not isinstance(api_key, str):
        raise AnsibleFilterError('sglang_server_api_key is a %s; it must be a string (quote it)' % type(api_key).__name__)
    if api_key:
        check_text(to_text(api_key), 'sglang_server_api_key', show=False)
        if to_text(api_key) != to_text(api_key).strip():
            raise AnsibleFilterError('sglang_server_api_key=(hidden) starts or ends with a space')
        config['api-key'] = to_text(api_key)
    return json.dumps(config, indent=2, ensure_ascii=False, allow_nan=False) + '\n'


def _systemd_quoted(text):
    """One word of a unit file value: bare when safe, else double-quoted with escapes."""
    if re.match(r'[A-Za-z0-9_./:@,=+-]+\Z', text):
        return text
    return '"%s"' % text.replace('\\', '\\\\').replace('"', '\\"')


def systemd_environment(env, variable='sglang_server_env'):
    """{NAME: value} to the values of sorted Environment= lines ("NAME=value", quoted when needed).

    systemd resolves % specifiers in Environment= (hence %%) but expands no $ there.
    """
    if not isinstance(env, dict):
        raise AnsibleFilterError('%s=%r is not a dict' % (variable, env))
    lines = []
    for name in sorted(env):
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise AnsibleFilterError('%s has the name %r; a variable name is letters, digits and _, not starting '
                                     'with a digit' % (variable, name))
        value = env[name]
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        if isinstance(value, float) and not math.isfinite(value):
            raise AnsibleFilterError("%s['%s']=%r is not a finite number" % (variable, name, value))
        if not isinstance(value, (str, int, float)):
            raise AnsibleFilterError("%s['%s']=%r is a %s; a value is a string or a number"
                                     % (variable, name, value, type(value).__name__))
        value = to_text(value)
        check_text(value, "%s['%s']" % (variable, name))
        lines.append(_systemd_quoted('%s=%s' % (name, value.replace('%', '%%'))))
    return lines


def systemd_command(argv, variables=None):
    """A command line for ExecStart=: each word quoted when needed, % and $ escaped.

    variables names the variable each word comes from, for the messages.
    """
    if not isinstance(argv, (list, tuple)) or not argv:
        raise AnsibleFilterError('ExecStart %r is not a non-empty list of words' % (argv,))
    words = []
    for index, word in enumerate(argv):
        variable = variables[index] if variables and index < len(variables) else 'ExecStart word %d' % index
        if not isinstance(word, str) or not word:
            raise AnsibleFilterError('%s=%r is not a non-empty string' % (variable, word))
        word = to_text(word)
        check_text(word, variable)
        if index == 0 and not word.startswith('/'):
            raise AnsibleFilterError('%s=%r is not an absolute path' % (variable, word))
        words.append(_systemd_quoted(word.replace('%', '%%').replace('$', '$$')))
    return ' '.join(words)


class FilterModule(object):
    def filters(self):
        return {
            'sglang_server_config': sglang_server_config,
            'systemd_environment': systemd_environment,
            'systemd_command': systemd_command,
        }
