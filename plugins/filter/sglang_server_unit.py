# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that render the SGLang server's config file and its systemd unit's values.

The checks and the rendering are plugin_utils/server_config.py's, which the inventory check and the
role's first check share; a value it refuses fails here with the same message, naming its variable.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_config import (
    ServerConfigError, command_line, config_text, environment_lines)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variables import FLAG_VARIABLES


def sglang_server_config(flags, api_key='', extra_args=None):
    """The config file's text: {flag: value} as JSON, sglang_server_extra_args over them, the key under api-key."""
    try:
        return config_text(flags, FLAG_VARIABLES, api_key, extra_args)
    except ServerConfigError as exc:
        raise AnsibleFilterError(str(exc)) from None


def systemd_environment(env, variable='sglang_server_env'):
    """{NAME: value} to the values of sorted Environment= lines ("NAME=value", quoted when needed)."""
    try:
        return environment_lines(env, variable)
    except ServerConfigError as exc:
        raise AnsibleFilterError(str(exc)) from None


def systemd_command(argv, variables=None):
    """A command line for ExecStart=: each word quoted when needed, % and $ escaped."""
    try:
        return command_line(argv, variables)
    except ServerConfigError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule(object):
    def filters(self):
        return {
            'sglang_server_config': sglang_server_config,
            'systemd_environment': systemd_environment,
            'systemd_command': systemd_command,
        }
