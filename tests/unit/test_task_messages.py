"""The messages of the roles' and playbooks' tasks, read from their YAML: a message written as
a folded block (`msg: >-`) reads as one line. YAML keeps the line break after a line that is
indented deeper than the others, so a Jinja expression continued on a deeper line used to put a
newline in the middle of a message (and a test looking for the sentence did not find it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FILES = sorted(str(p.relative_to(REPO)) for pattern in ('roles/**/*.yml', 'playbooks/**/*.yml', 'extract.yml')
               for p in REPO.glob(pattern))
MESSAGE_KEYS = {'msg', 'fail_msg', 'success_msg'}
# what Jinja computes, where a newline is its own business (a log tail joined with newlines)
JINJA = re.compile(r'\{\{.*?\}\}|\{%.*?%\}', re.S)


def folded_messages(node, found, key=None):
    """(line, text) of every folded scalar under a message key, and of the task vars it uses."""
    if isinstance(node, yaml.ScalarNode):
        if node.style == '>' and key in MESSAGE_KEYS | {'vars'}:
            found.append((node.start_mark.line + 1, node.value))
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            folded_messages(item, found, key)
    elif isinstance(node, yaml.MappingNode):
        for name, value in node.value:
            # a task's vars are where its messages' parts are made
            folded_messages(value, found, 'vars' if key == 'vars' else name.value)


def literal_newlines(text):
    return '\n' in JINJA.sub('', text).rstrip('\n')


@pytest.mark.parametrize('path', FILES)
def test_folded_messages_have_no_stray_newline(path):
    found = []
    for document in yaml.compose_all((REPO / path).read_text()):
        folded_messages(document, found)
    bad = ['%s:%d: %r' % (path, line, text[:120]) for line, text in found if literal_newlines(text)]
    assert not bad, 'a folded message keeps a line break (a line indented deeper):\n' + '\n'.join(bad)


def test_the_check_finds_a_deeper_line():
    """The case that broke sglang_server's tp-size message."""
    text = ('fail_msg: >-\n  tp-size {{ tp }}{{\n  (" over" if many else "")\n'
            '   ~ "" }}\n  does not fit\n')
    found = []
    folded_messages(yaml.compose(text), found)
    assert [literal_newlines(value) for value in dict(found).values()] == [True]
