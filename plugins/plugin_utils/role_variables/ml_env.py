# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ml_env's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import DOTTED_NAME, each, path, pattern
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

# Debian Policy 5.6.7: lower case letters, digits, + - and ., starting with a letter or digit
DEBIAN_PACKAGE = re.compile(r'[a-z0-9][a-z0-9+.-]{1,99}')

ROLE = 'ml_env'

# a requirement spec as pip reads it, never an option (-e, --index-url...)
REQUIREMENT = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*([<>=!~]=?=?\s*[A-Za-z0-9.*+!_-]+'
                         r'\s*,?\s*)*(\s*;\s*[^;]+)?|[A-Za-z0-9][A-Za-z0-9._-]*\s*@\s*\S+')
DEFAULTS_HEADER = ()

ENTRY_POINTS = (
    EntryPoint(
        'main', "Make the inference server's venv and check its modules with its own interpreter",
        description=[
            (
                "Makes a venv at O(ml_env_path) with O(ml_env_python) and installs into it, with the venv's pip, "
                'the pinned specs of O(ml_env_packages), the requirements file O(ml_env_requirements_file) and the '
                'source checkouts of O(ml_env_editable) (C(pip install -e)). With O(ml_env_wheelhouse) set, pip '
                'installs from that directory alone (C(--no-index --find-links)); O(ml_env_wheelhouse_src) is '
                'copied there first.'),
            (
                "Then asks the venv's interpreter to find every module of O(ml_env_import_checks) and fails, "
                'naming the interpreter and each module it cannot find, before any server is started.'),
            'A second run changes nothing. Supports check mode.',
            "Sets the fact C(ml_env_python_bin), the venv's interpreter, for later roles.",
        ]),
)

VARIABLES = (
    Variable(
        'ml_env_path', 'str', '/root/ml-env',
        description=(
            'Absolute path of the venv, not a system directory (V(/), V(/usr), V(/root), V(/etc) and the like).'),
        rule=path(), plan=True,
        comment=(
            'Where the venv goes and the interpreter that makes it (it must have the venv\n'
            "module: Debian's python3-venv).")),
    Variable(
        'ml_env_python', 'str', '/usr/bin/python3',
        description="The interpreter that makes the venv; it needs the C(venv) module (Debian's C(python3-venv)).",
        rule=path(what='an absolute path')),
    Variable(
        'ml_env_packages', 'list', [],
        description=(
            'Requirement specs to install, pinned, for example V(sglang==0.5.23); each a requirement, never a pip '
            'option.'),
        elements='str',
        rule=each(pattern(REQUIREMENT, 'a requirement spec such as sglang==0.5.23 (not a pip option)')),
        same_on_every_node=True,
        comment='Pinned requirement specs, for example ["sglang==0.5.23"].', group=True),
    Variable(
        'ml_env_system_packages', 'list', [],
        description=(
            'Debian packages the wheels need from the system, installed with apt before the venv is made (present: '
            "a host that has them needs no apt index). Mooncake's wheels link against V(libibverbs1), V(libnuma1) "
            'and V(libcurl4): the online mode gives them to every host that runs a Mooncake client or master.'),
        elements='str',
        rule=each(pattern(DEBIAN_PACKAGE, 'a Debian package name such as libibverbs1')),
        comment="Debian packages the wheels link against (the online mode: Mooncake's, libibverbs1 ...)."),
    Variable(
        'ml_env_requirements_file', 'str', '',
        description=[
            (
                'A requirements file on the controller, copied to C(<ml_env_path>/requirements.txt) and installed; '
                'empty installs none.'),
        ],
        comment='A requirements file on the controller; pushed to {{ ml_env_path }}/requirements.txt.'),
    Variable(
        'ml_env_wheelhouse', 'str', '',
        description=[
            (
                'Absolute path of a directory of wheels on the target. When set, every install is offline, from '
                'that directory only (C(--no-index --find-links)); empty uses the package index.'),
        ],
        rule=path(empty=True), same_on_every_node=True,
        comment=(
            'A directory of wheels on the target: when set, pip installs from it alone\n'
            '(--no-index --find-links). ml_env_wheelhouse_src, a directory on the controller,\n'
            'is copied there first.')),
    Variable(
        'ml_env_wheelhouse_src', 'str', '',
        description=(
            'A directory of wheels on the controller, copied into O(ml_env_wheelhouse) first; empty copies nothing.')),
    Variable(
        'ml_env_editable', 'list', [],
        description=[
            (
                'Absolute paths of source checkouts on the target to install editable (C(pip install -e)), for '
                'example V(/root/sglang/python). A checkout already installed editable is left alone.'),
        ],
        elements='str',
        rule=each(path()), same_on_every_node=True,
        comment=(
            'Source checkouts on the target installed with `pip install -e`, for example\n'
            '["/root/sglang/python"].')),
    Variable(
        'ml_env_pip_extra_args', 'str', '',
        description='More options for every pip install, for example V(--extra-index-url https://example.org/simple).',
        comment='More pip options for every install, for example "--extra-index-url URL".'),
    Variable(
        'ml_env_import_checks', 'list', ['sglang.launch_server'],
        description=[
            (
                "Dotted module names the venv's interpreter must find (C(importlib.util.find_spec)); the module "
                'itself is not run. Empty checks nothing.'),
        ],
        elements='str',
        rule=each(pattern(DOTTED_NAME, 'a dotted module name')),
        comment="Modules the venv's interpreter must find before any server starts.", group=True),
)
