# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role variable's record: everything about it, declared once.

Each role's records are plugins/plugin_utils/role_variables/<role>.py, one ``Variable`` each, in
the order its files list them. From them come the role's meta/argument_specs.yml,
defaults/main.yml and README table (lab/tools/role_files.py --write; a unit test fails when a
committed file differs), the rules the inventory check and each role's first check apply
(role_inputs.py), what the host's plan reads (host_plan.py), what every node of a multi-node
server must agree on (server_layout.py) and the SGLang flags the plan makes of variables.
The shape is community.docker's: an option declared once, typed, with its comparison rule, and
the argument spec built from it.
"""

from __future__ import annotations

# a variable without a default (an entry point's required option)
NO_DEFAULT = object()
SPEC_KEYS = ('description', 'type', 'elements', 'choices', 'required', 'no_log', 'default')


class Variable:
    """One role variable.

    name, type, default, description: as its argument spec states them (description: a string or
    a list of paragraphs, in Ansible's markup). elements, choices, required, no_log: the spec's too.
    rule: a value_rules.Rule beyond the type (a range, a whole-value pattern...), or None.
    plan: the host's plan reads it (its own host's value); peer: the plan reads it of the other hosts
    too (a multi-node server's layout and rank 0's address); flag: the SGLang flag (without --) the
    plan makes of it. peer and flag imply plan.
    same_on_every_node: every node of a multi-node server must hold the same value.
    needed: what to give, when a container must set it (no default serves).
    template_text: a chat template's text, which may hold newlines and tabs (only the job's JSON
    config holds it, escaped); any other variable refuses every control character.
    comment, group: its defaults/main.yml comment (the lines above it, without '# ') and whether a
    blank line comes before it.
    """

    def __init__(self, name, type, default=NO_DEFAULT, description='', elements=None, choices=None,
                 required=False, no_log=False, rule=None, plan=False, peer=False, flag=None,
                 same_on_every_node=False, needed=None, template_text=False, comment='', group=False):
        # pylint: disable=redefined-builtin,too-many-arguments
        self.name = name
        self.type = type
        self.default = default
        self.description = description
        self.elements = elements
        self.choices = choices
        self.required = required
        self.no_log = no_log
        self.rule = rule
        self.peer = peer
        self.flag = flag
        self.plan = bool(plan or peer or flag)
        self.same_on_every_node = same_on_every_node
        self.needed = needed
        self.template_text = template_text
        self.comment = comment
        self.group = group

    @property
    def has_default(self):
        return self.default is not NO_DEFAULT

    def spec(self, **changes):
        """The variable's argument spec option, with changes (an entry point's own description...)."""
        spec = {'description': self.description, 'type': self.type}
        if self.elements:
            spec['elements'] = self.elements
        if self.choices:
            spec['choices'] = list(self.choices)
        if self.required:
            spec['required'] = True
        if self.no_log:
            spec['no_log'] = True
        if self.has_default:
            spec['default'] = self.default
        spec.update(changes)
        for key in [key for key, value in spec.items() if value is NO_DEFAULT]:
            del spec[key]
        return dict((key, spec[key]) for key in SPEC_KEYS if key in spec)


class EntryPoint:
    """A role entry point (main, or a tasks_from) as meta/argument_specs.yml states it.

    options: 'main' (the main entry point's options, all of them), or {name: changes} - each a
    variable of the role's, with the spec keys this entry point states differently ({} for none).
    """

    def __init__(self, name, short_description, description=None, options='main'):
        self.name = name
        self.short_description = short_description
        self.description = description
        self.options = options
