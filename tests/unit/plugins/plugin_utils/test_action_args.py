"""plugin_utils/action_args: an action plugin's arguments against its spec, every error named after the action."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.plugin_utils.action_args import validated

SPEC = {'path': {'type': 'str', 'required': True}, 'timeout': {'type': 'int', 'default': 120}}


def test_valid_arguments_with_their_defaults():
    assert validated('pct_list', SPEC, {'path': '/usr/sbin/pct', 'timeout': '30'}) == (
        {'path': '/usr/sbin/pct', 'timeout': 30}, None)
    assert validated('pct_list', SPEC, {'path': '/x'}) == ({'path': '/x', 'timeout': 120}, None)


def test_every_error_named_after_the_action():
    args, error = validated('pct_list', SPEC, {'timeout': 'soon', 'bogus': 1})
    assert args is None and error.startswith('pct_list: ')
    for word in ('path', 'timeout', 'bogus'):
        assert word in error, error
