# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hide secrets in command lines and log text before they reach a result, a message or a log.

A value is secret when the flag, variable or field it belongs to is named like one: a name
(split at ``-``, ``_``, ``.`` and camelCase humps) with a word such as ``key``, ``token``,
``password`` or ``secret`` (``--api-key``, ``--admin-api-key``, ``HF_TOKEN``, ``SGLANG_API_KEY``,
``--password``). ``--tokenizer-path`` or ``--ssl-keyfile`` are not: only whole words count.

The forms covered are those the collection meets:

* argv lists: ``--api-key VALUE``, ``--api-key=VALUE``, ``NAME=VALUE`` (``env`` style), and any
  element that is itself a whole command line (``sh -c '... --api-key x'``);
* text: the same, plus Python reprs (SGLang logs ``server_args=ServerArgs(... api_key='x', ...)``
  at start), JSON or dict items (``"api_key": "x"``), YAML lines (``api-key: x``) and HTTP
  ``Authorization: Bearer x`` headers.

Redaction errs on the side of hiding: a value it cannot delimit is hidden to the end of the
element or line.
"""

from __future__ import annotations

import re

REDACTED = '<redacted>'

# whole words of a name that make its value a secret
SECRET_WORDS = frozenset((
    'key', 'apikey', 'token', 'password', 'passwd', 'passphrase', 'pwd',
    'secret', 'secrets', 'credential', 'credentials',
))

# values that say "no secret set"; kept so that a log still tells whether a key was given
_UNSET = frozenset(('None', "''", '""', ''))

_NAME = r'[A-Za-z_][A-Za-z0-9_.-]*'
_HUMP = re.compile(r'(?<=[a-z0-9])(?=[A-Z])')
_WORD_SPLIT = re.compile(r'[-_.]+')

# a value in text: quoted, or a run of non-blanks (without closing punctuation of a repr)
_VALUE = r'''(?:'[^'\n]*'?|"[^"\n]*"?|\S+?(?=[,;)\]}'"]*(?:\s|$)))'''

# --name VALUE or --name=VALUE (one or two dashes); a value after a blank never starts with '-'
_FLAG_IN_TEXT = re.compile(r'(?<![\w.-])(?P<flag>--?' + _NAME + r')(?P<sep>=|[ \t]+(?=[^\s-]))(?P<value>' + _VALUE + r')')
# NAME=VALUE: environment assignments and Python keyword reprs (api_key='x')
_ASSIGN_IN_TEXT = re.compile(r'(?<![\w.-])(?P<flag>' + _NAME + r')(?P<sep>=)(?P<value>' + _VALUE + r')')
# "name": "value" or 'name': 'value' (JSON, Python dict reprs)
_ITEM_IN_TEXT = re.compile(r'''(?P<flag>(?P<q>["'])''' + _NAME + r'''(?P=q))(?P<sep>\s*:\s*)(?P<value>''' + _VALUE + r')')
# name: value as a whole YAML line (an SGLang --config file shown in a diff or a message)
_YAML_LINE = re.compile(r'^(?P<flag>[ \t]*(?:-[ \t]+)?' + _NAME + r')(?P<sep>[ \t]*:[ \t]+)(?P<value>[^\n]*?)[ \t]*$', re.M)
_BEARER = re.compile(r"""(?i)\b(?P<flag>bearer)(?P<sep>[ \t]+)(?P<value>[^\s'"]+)""")


def is_secret_name(name: str) -> bool:
    """True when a flag, variable or field named ``name`` holds a secret (``--api-key``, ``HF_TOKEN``)."""
    bare = name.strip('\'"').lstrip('-')
    words = _WORD_SPLIT.split(_HUMP.sub('_', bare))
    return any(word.lower() in SECRET_WORDS for word in words if word)


def _redact_matches(pattern: re.Pattern, text: str, always: bool = False) -> str:
    """Replace the value of every match of ``pattern`` whose name is secret.

    A match whose name is not secret gives back all but its name to the search, so that a
    secret inside what looked like its value (``server_args=ServerArgs(api_key='k')``) is
    still found.
    """
    out = []
    pos = 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            break
        value = match.group('value')
        if always or (is_secret_name(match.group('flag')) and value not in _UNSET):
            out.append(text[pos:match.start('value')])
            out.append(REDACTED)
            pos = match.end('value')
        else:
            out.append(text[pos:match.end('flag')])
            pos = match.end('flag')
    out.append(text[pos:])
    return ''.join(out)


def redact_text(text: str) -> str:
    """``text`` (a command line, a log line, a message) with every secret value replaced by ``<redacted>``."""
    if not text:
        return text
    text = _redact_matches(_BEARER, text, always=True)
    for pattern in (_YAML_LINE, _ITEM_IN_TEXT, _FLAG_IN_TEXT, _ASSIGN_IN_TEXT):
        text = _redact_matches(pattern, text)
    return text


def redact_argv(argv: list[str]) -> list[str]:
    """A copy of ``argv`` with every secret value replaced by ``<redacted>``.

    ``['sglang', '--api-key', 'k', '--port', '30000']`` becomes
    ``['sglang', '--api-key', '<redacted>', '--port', '30000']``; ``--api-key=k`` becomes
    ``--api-key=<redacted>`` and ``HF_TOKEN=t`` becomes ``HF_TOKEN=<redacted>``. An element holding
    blanks (a shell command given to ``sh -c``) is redacted as text.
    """
    out = []
    hide_next = False
    for arg in argv:
        arg = '' if arg is None else str(arg)
        if hide_next:
            hide_next = False
            # a flag given without its value: the next flag is not the secret
            if not arg.startswith('--'):
                out.append(REDACTED)
                continue
        name, sep, value = arg.partition('=')
        if sep and re.fullmatch(r'-{0,2}' + _NAME, name) and is_secret_name(name):
            out.append(name + sep + REDACTED)
        elif not sep and arg.startswith('-') and re.fullmatch(r'--?' + _NAME, arg) and is_secret_name(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(redact_text(arg))
    return out


def redact_value(value):
    """``value`` with every string in it redacted as text (dicts and lists are walked; other types kept)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return dict((key, REDACTED if isinstance(key, str) and is_secret_name(key) and item not in (None, '')
                     else redact_value(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(item) for item in value)
    return value
