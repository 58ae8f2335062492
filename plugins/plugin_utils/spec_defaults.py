# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's defaults as its argument spec states them: the one place controller code reads them.

Where a fact is computed outside its role (a lookup, the inventory check, a playbook that runs
without the role), the role's own variables may be unset; their defaults are then the spec's, read
here, never written again in code or YAML. The specs equal the roles' defaults/main.yml (a unit test).
"""

from __future__ import annotations

import os

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPECS = {}


def role_options(role, collection=COLLECTION):
    """The options of the role's main entry point, as its meta/argument_specs.yml states them: read once a
    process (libyaml's loader when PyYAML has it: every task runs in a fresh worker, which reads them again).
    Shared: a caller that changes them copies them first."""
    key = (collection, role)
    if key not in _SPECS:
        import yaml  # pylint: disable=import-outside-toplevel

        loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
        with open(os.path.join(collection, 'roles', role, 'meta', 'argument_specs.yml'), encoding='utf-8') as f:
            _SPECS[key] = yaml.load(f, Loader=loader)['argument_specs']['main']['options']  # a safe loader, C or Python
    return _SPECS[key]


def spec_defaults(role, names, collection=COLLECTION):
    """{name: default} of the role's main entry point, for each of names."""
    options = role_options(role, collection)
    return dict((name, options[name].get('default')) for name in names)
