# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's defaults as its variable records state them: the one place controller code reads them.

Where a fact is computed outside its role (a lookup, the inventory check, a playbook that runs
without the role), the role's own variables may be unset; their defaults are then the records'
(plugins/plugin_utils/role_variables/<role>.py, of which the role's meta/argument_specs.yml and
defaults/main.yml are made), read here, never written again in code or YAML.
"""

from __future__ import annotations

import os

from ansible_collections.eagle3.extraction.plugins.plugin_utils import variables

# the collection's root (the tests read its roles' files through it)
COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def role_options(role):
    """The options of the role's main entry point, as its meta/argument_specs.yml states them (made from its
    records once a process). Shared: a caller that changes them copies them first."""
    return variables.options(role)


def spec_defaults(role, names):
    """{name: default} of the role's main entry point, for each of names (a KeyError for one it lacks)."""
    options = role_options(role)
    return dict((name, options[name].get('default')) for name in names)
