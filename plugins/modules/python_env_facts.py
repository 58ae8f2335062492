#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: python_env_facts
short_description: What the Python interpreter running the module can import, which distributions it has, which checkouts are editable
version_added: 0.1.0
description:
  - Reads, without importing them, what a Python environment holds. Run it with the environment's own interpreter
    (set C(ansible_python_interpreter) on the task); every answer is that interpreter's.
  - O(modules) are located with C(importlib.util.find_spec), which does not run a top-level package's
    C(__init__) (a dotted name imports its parent packages, as C(python -m) would). Heavy packages such as sglang,
    whose import may start CUDA, are found without being imported.
  - O(distributions) are looked up with C(importlib.metadata).
  - O(editable_paths) are compared with the PEP 610 C(direct_url.json) of every installed distribution.
  - O(requirements) are read with the C(packaging) library, which C(ansible.builtin.pip) needs in the environment
    too, and compared with the installed versions.
  - Changes nothing.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  modules:
    description:
      - Dotted module names to locate.
    type: list
    elements: str
    default: []
  distributions:
    description:
      - Distribution (package) names whose installed version to read.
    type: list
    elements: str
    default: []
  editable_paths:
    description:
      - Absolute paths of source checkouts; RV(editable_paths_missing) lists those not installed editable.
    type: list
    elements: path
    default: []
  requirements:
    description:
      - Requirement strings as pip takes them (V(torch==2.13.0), V(aiohttp>=3.9)); RV(requirements_unmet) lists
        those the environment does not meet, so that a caller runs pip only when one is unmet.
      - A requirement is met when its distribution is installed at a version its specifier admits, or its
        environment marker excludes this interpreter. One that names extras or a URL, or cannot be read, is
        never met (pip decides), and so is every one when C(packaging) is missing.
    type: list
    elements: str
    default: []
  requirements_file:
    description:
      - A pip requirements file on the host; RV(requirements_file_unmet) lists its requirements the environment
        does not meet, read as O(requirements) are. A file with an option line (V(-r), V(-e), V(--hash) and the
        like), or that cannot be read, is never met; every line is listed, and pip decides.
    type: path
  require:
    description:
      - Fail when a module of O(modules) cannot be found or a distribution of O(distributions) is not installed,
        naming the interpreter and each module with its reason and each distribution; the message begins with
        O(role) and ends with O(advice).
      - Fail too when an installed distribution of O(versions) has a version that O(versions) does not list,
        naming it, its version and the versions listed.
    type: bool
    default: false
  versions:
    description:
      - With O(require), the versions accepted for a distribution of O(distributions), by name (for example
        C(sglang) with the list C([0.5.23])); a distribution not named here may have any version.
    type: dict
    default: {}
  role:
    description:
      - With O(require), the role the message begins with.
    type: str
    default: ''
  advice:
    description:
      - With O(require), what the message tells to do, at its end.
    type: str
    default: ''
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The interpreter must be Python 3.8 or newer (C(importlib.metadata)).
'''

EXAMPLES = r'''
- name: Find sglang and its version without importing it
  eagle3.extraction.python_env_facts:
    modules: [sglang]
    distributions: [sglang]
  vars:
    ansible_python_interpreter: /root/ml-env/bin/python
  register: found

- name: Fail unless sglang is installed
  ansible.builtin.assert:
    that:
      - found.modules.sglang.error is none
      - found.distributions.sglang is not none
'''

RETURN = r'''
python:
  description: The interpreter that answered.
  returned: always
  type: dict
  contains:
    executable:
      description: C(sys.executable).
      type: str
    version:
      description: Its version, C(major.minor.micro).
      type: str
  sample: {executable: /root/ml-env/bin/python, version: 3.12.3}
modules:
  description: One entry per O(modules) name.
  returned: always
  type: dict
  contains:
    error:
      description: Why it cannot be found, or null.
      type: str
    path:
      description: The package directory (real path) of a package, the file of a module, or null.
      type: str
  sample: {sglang: {error: null, path: /root/ml-env/lib/python3.12/site-packages/sglang}}
distributions:
  description: The installed version of each O(distributions) name, null where it is not installed.
  returned: always
  type: dict
  sample: {sglang: 0.5.23}
modules_missing:
  description: The O(modules) that cannot be found, in the order given, each as C(<name> (<why>)), for a message.
  returned: always
  type: list
  elements: str
  sample: ["sglang (ModuleNotFoundError: No module named 'sglang')"]
editable_paths_missing:
  description: The O(editable_paths) not installed editable, in the order given.
  returned: always
  type: list
  elements: str
requirements_unmet:
  description: The O(requirements) the environment does not meet, in the order given.
  returned: always
  type: list
  elements: str
  sample: [torch==2.13.0]
requirements_file_unmet:
  description: The requirements of O(requirements_file) the environment does not meet, in the file's order.
  returned: when O(requirements_file) is set
  type: list
  elements: str
  sample: [specforge==0.2.0]
'''

import importlib.util
import json
import os
import re
import sys

from ansible.module_utils.basic import AnsibleModule

MODULE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*')
# PEP 508 names
DISTRIBUTION_NAME = re.compile(r'[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]')


def locate(name):
    """{'error': None or why, 'path': package dir or module file}; runs no top-level __init__."""
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:  # a parent package is missing or fails to import
        return {'error': '%s: %s' % (type(exc).__name__, exc), 'path': None}
    if spec is None:
        return {'error': 'No module named %r' % name, 'path': None}
    if spec.submodule_search_locations:
        return {'error': None, 'path': os.path.realpath(list(spec.submodule_search_locations)[0])}
    origin = spec.origin if spec.origin and os.path.isabs(spec.origin) else None
    return {'error': None, 'path': os.path.realpath(origin) if origin else None}


def missing(modules):
    """``<name> (<why>)`` of each module that cannot be found, in the order of ``modules`` (a dict of locate())."""
    return ['%s (%s)' % (name, found['error']) for name, found in modules.items() if found['error']]


def installed_version(name):
    import importlib.metadata
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def editable_checkouts():
    """Real paths of the source checkouts installed editable (PEP 610 direct_url.json)."""
    import importlib.metadata
    from urllib.parse import urlparse
    from urllib.request import url2pathname
    have = set()
    for dist in importlib.metadata.distributions():
        raw = dist.read_text('direct_url.json')
        if not raw:
            continue
        try:
            info = json.loads(raw)
        except ValueError:
            continue
        if info.get('dir_info', {}).get('editable') and info.get('url', '').startswith('file:'):
            have.add(os.path.realpath(url2pathname(urlparse(info['url']).path)))
    return have


def unmet_requirements(requirements):
    """The requirement strings of ``requirements`` this interpreter's environment does not meet: every one when the
    packaging library is missing; one with extras or a URL, or that cannot be parsed, is left to pip (unmet)."""
    if not requirements:
        return []
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return list(requirements)
    unmet = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            unmet.append(text)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        version = None if requirement.extras or requirement.url else installed_version(requirement.name)
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            unmet.append(text)
    return unmet


def requirement_lines(path):
    """The requirement strings of a pip requirements file, comments and blank lines left out; (lines, True) when
    pip alone can read it (an option line, a continuation, a file that cannot be read)."""
    try:
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return [path], True
    lines = [line.split(' #', 1)[0].strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith('#')]
    return lines, any(line.startswith('-') or line.endswith('\\') for line in lines)


def unsupported_versions(installed, versions):
    """``<name> <version>`` of each installed distribution whose version ``versions`` ({name: [version]}) does
    not list."""
    return ['%s %s' % (name, version) for name, version in sorted(installed.items())
            if version is not None and name in versions and version not in [str(v) for v in versions[name]]]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            modules=dict(type='list', elements='str', default=[]),
            distributions=dict(type='list', elements='str', default=[]),
            editable_paths=dict(type='list', elements='path', default=[]),
            requirements=dict(type='list', elements='str', default=[]),
            requirements_file=dict(type='path'),
            require=dict(type='bool', default=False),
            role=dict(type='str', default=''),
            advice=dict(type='str', default=''),
            versions=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in params['modules']:
        if not MODULE_NAME.fullmatch(name):
            module.fail_json(msg='modules: %r is not a dotted module name' % name)
    for name in params['distributions']:
        if not DISTRIBUTION_NAME.fullmatch(name):
            module.fail_json(msg='distributions: %r is not a distribution name' % name)
    for path in params['editable_paths']:
        if not os.path.isabs(path) or any(ord(c) < 32 for c in path):
            module.fail_json(msg='editable_paths: %r is not an absolute path' % path)
    for text in params['requirements']:
        if not text.strip() or any(ord(c) < 32 for c in text):
            module.fail_json(msg='requirements: %r is not a requirement' % text)

    have = editable_checkouts() if params['editable_paths'] else set()
    modules = {name: locate(name) for name in params['modules']}
    result = dict(
        changed=False,
        python={'executable': sys.executable, 'version': '%d.%d.%d' % sys.version_info[:3]},
        modules=modules,
        modules_missing=missing(modules),
        distributions={name: installed_version(name) for name in params['distributions']},
        editable_paths_missing=[p for p in params['editable_paths'] if os.path.realpath(p) not in have],
        requirements_unmet=unmet_requirements(params['requirements']),
    )
    if params['requirements_file']:
        lines, pip_alone = requirement_lines(params['requirements_file'])
        result['requirements_file_unmet'] = lines if pip_alone else unmet_requirements(lines)
    absent = ['no distribution named %s is installed' % name
              for name, version in result['distributions'].items() if version is None]
    role = params['role'] + ': ' if params['role'] else ''
    advice = ' ' + params['advice'] if params['advice'] else ''
    if params['require'] and (result['modules_missing'] or absent):
        module.fail_json(msg='%s%s cannot find %s.%s' % (
            role, sys.executable, '; '.join(result['modules_missing'] + absent), advice), **result)
    unsupported = unsupported_versions(result['distributions'], params['versions'])
    if params['require'] and unsupported:
        module.fail_json(msg='%s%s (%s) is not supported; supported versions: %s.%s' % (
            role, '; '.join(unsupported), sys.executable,
            '; '.join('%s %s' % (name, ', '.join(str(v) for v in params['versions'][name]))
                      for name in sorted(params['versions'])), advice), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
