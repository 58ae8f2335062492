# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang server's config file and its systemd unit's values: each checked whole, then rendered.

The one check of sglang_server_flags, sglang_server_extra_args, sglang_server_env and
sglang_server_api_key: the inventory check and each role's first check (plugin_utils/role_inputs.py),
the host's plan (which merges the flags) and the filters that write the config file and the unit
(plugins/filter/sglang_server_unit.py) all call it, so one value gets one answer everywhere.

The unit's command line holds only ``python -m <module> --config <file>``: every flag and the API key
go to a root-only YAML file that SGLang's ``--config`` reads (its ConfigArgumentMerger turns each key
into ``--key value``). No newline or control character reaches the file or the unit, and a bad value
fails naming its variable.

A flag that has a variable of its own (``owned``: {flag: variable}, plugin_utils/variables.py's
FLAG_VARIABLES, computed from the records: --model-path, --host, --port, --tp-size) comes from that
variable alone: sglang_server_flags and sglang_server_extra_args refuse it by name, with the variable to
set, so that the port and bind host the clients call (plugin_utils/server_listen.py) are the ones the
config file holds. The records' own rules use these checks, so the mapping is handed in, not imported.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata

from ansible.module_utils.common.text.converters import to_text

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


class ServerConfigError(ValueError):
    """A value the config file or the unit cannot hold; the message names the variable and its value."""


def bad_character(text):
    """The first character of text that no file or command line may hold, or None."""
    for char in text:
        if unicodedata.category(char) in BAD_CATEGORIES:
            return char
    return None


def check_text(text, variable, show=True):
    char = bad_character(text)
    if char is not None:
        raise ServerConfigError('%s=%s holds the control character %r; a value must be one line of printable text'
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
            raise ServerConfigError('%s=%r is not a finite number' % (variable, value))
        return value
    if isinstance(value, (list, tuple)):
        items = []
        for index, item in enumerate(value):
            if isinstance(item, (list, tuple, dict)) or item is None:
                raise ServerConfigError('%s[%d]=%r: a list holds strings or numbers' % (variable, index, item))
            items.append(check_value(item, '%s[%d]' % (variable, index)))
        return items
    if isinstance(value, dict):
        checked = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ServerConfigError('%s has the key %r; keys are strings' % (variable, key))
            check_text(to_text(key), '%s key' % variable)
            checked[to_text(key)] = check_value(item, "%s['%s']" % (variable, key))
        return checked
    raise ServerConfigError('%s=%r is a %s; a flag takes a string, number, boolean, list or dict'
                            % (variable, value, type(value).__name__))


def check_flag_name(key, variable):
    if not isinstance(key, str) or not FLAG_NAME.match(key):
        raise ServerConfigError('%s has the flag %r; a flag is its long name without --, lower-case letters, digits '
                                'and -, for example mem-fraction-static' % (variable, key))
    if key in RESERVED_FLAGS:
        raise ServerConfigError("%s has the flag '%s': %s" % (variable, key, RESERVED_FLAGS[key]))


def _refuse_owned_flag(key, where, owned):
    """A flag of owned given another way (``where`` says how): refused, naming its variable."""
    if key in owned:
        raise ServerConfigError('%s; --%s is %s\'s: set that instead' % (where, key, owned[key]))


def flag_variable(key, owned):
    """The variable a flag of the config file comes from, for the messages."""
    return owned.get(key) or "sglang_server_flags['%s']" % key


def checked_flags(flags, owned):
    """sglang_server_flags, each key and value checked: none of owned (they have their variables), no
    reserved flag, no control character, no number that is not finite."""
    if not isinstance(flags, dict):
        raise ServerConfigError('sglang_server_flags=%r is not a dict' % (flags,))
    checked = {}
    for key, value in flags.items():
        check_flag_name(key, 'sglang_server_flags')
        _refuse_owned_flag(key, "sglang_server_flags['%s'] is set" % key, owned)
        checked[to_text(key)] = check_value(value, flag_variable(key, owned))
    return checked


def parse_extra_args(extra_args, owned):
    """sglang_server_extra_args, ``--key value ...`` as typed on a command line, to {key: value}: no value is
    true, several a list. The one parser of them: the flags of owned are refused at their --key."""
    if extra_args is None:
        return {}
    if isinstance(extra_args, str) or not isinstance(extra_args, (list, tuple)):
        raise ServerConfigError('sglang_server_extra_args=%r is not a list of strings' % (extra_args,))
    parsed = {}
    key = None
    for index, token in enumerate(extra_args):
        variable = 'sglang_server_extra_args[%d]' % index
        if not isinstance(token, str):
            raise ServerConfigError('%s=%r is not a string' % (variable, token))
        token = to_text(token)
        check_text(token, variable)
        if token.startswith('--'):
            key, sep, value = token[2:].partition('=')
            check_flag_name(key, variable)
            _refuse_owned_flag(key, '%s=%r sets --%s' % (variable, token, key), owned)
            parsed[key] = [value] if sep else []
        elif key is None:
            raise ServerConfigError('%s=%r comes before any --flag' % (variable, token))
        else:
            parsed[key].append(token)
    return dict((k, True if not v else v[0] if len(v) == 1 else v) for k, v in parsed.items())


def check_api_key(api_key):
    """sglang_server_api_key as the config file holds it ('' for none); never shown in a message."""
    if api_key is None:
        return ''
    if not isinstance(api_key, str):
        raise ServerConfigError('sglang_server_api_key is a %s; it must be a string (quote it)'
                                % type(api_key).__name__)
    check_text(to_text(api_key), 'sglang_server_api_key', show=False)
    if to_text(api_key) != to_text(api_key).strip():
        raise ServerConfigError('sglang_server_api_key=(hidden) starts or ends with a space')
    return to_text(api_key)


def config_text(flags, owned, api_key='', extra_args=None):
    """The config file's text: ``flags`` (the host plan's: the owned flags' variables, sglang_server_flags and the
    multi-node ones), then sglang_server_extra_args over them, as JSON, the key under api-key."""
    if not isinstance(flags, dict):
        raise ServerConfigError('sglang_server_flags=%r is not a dict' % (flags,))
    config = {}
    for key, value in flags.items():
        check_flag_name(key, 'sglang_server_flags')
        value = check_value(value, flag_variable(key, owned))
        if value is None or value is False or value == []:
            continue
        config[key] = value
    for key, value in parse_extra_args(extra_args, owned).items():
        config[key] = check_value(value, 'sglang_server_extra_args (--%s)' % key)
    api_key = check_api_key(api_key)
    if api_key:
        config['api-key'] = api_key
    return json.dumps(config, indent=2, ensure_ascii=False, allow_nan=False) + '\n'


def _systemd_quoted(text):
    """One word of a unit file value: bare when safe, else double-quoted with escapes."""
    if re.match(r'[A-Za-z0-9_./:@,=+-]+\Z', text):
        return text
    return '"%s"' % text.replace('\\', '\\\\').replace('"', '\\"')


def environment_lines(env, variable='sglang_server_env'):
    """{NAME: value} to the values of sorted Environment= lines ("NAME=value", quoted when needed).

    systemd resolves % specifiers in Environment= (hence %%) but expands no $ there.
    """
    if not isinstance(env, dict):
        raise ServerConfigError('%s=%r is not a dict' % (variable, env))
    lines = []
    for name in sorted(env):
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise ServerConfigError('%s has the name %r; a variable name is letters, digits and _, not starting '
                                    'with a digit' % (variable, name))
        value = env[name]
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        if isinstance(value, float) and not math.isfinite(value):
            raise ServerConfigError("%s['%s']=%r is not a finite number" % (variable, name, value))
        if not isinstance(value, (str, int, float)):
            raise ServerConfigError("%s['%s']=%r is a %s; a value is a string or a number"
                                    % (variable, name, value, type(value).__name__))
        value = to_text(value)
        check_text(value, "%s['%s']" % (variable, name))
        lines.append(_systemd_quoted('%s=%s' % (name, value.replace('%', '%%'))))
    return lines


def command_line(argv, variables=None):
    """A command line for ExecStart=: each word quoted when needed, % and $ escaped.

    variables names the variable each word comes from, for the messages.
    """
    if not isinstance(argv, (list, tuple)) or not argv:
        raise ServerConfigError('ExecStart %r is not a non-empty list of words' % (argv,))
    words = []
    for index, word in enumerate(argv):
        variable = variables[index] if variables and index < len(variables) else 'ExecStart word %d' % index
        if not isinstance(word, str) or not word:
            raise ServerConfigError('%s=%r is not a non-empty string' % (variable, word))
        word = to_text(word)
        check_text(word, variable)
        if index == 0 and not word.startswith('/'):
            raise ServerConfigError('%s=%r is not an absolute path' % (variable, word))
        words.append(_systemd_quoted(word.replace('%', '%%').replace('$', '$$')))
    return ' '.join(words)
