#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""system_packages: Debian packages present, installed with apt-get only when one is missing."""

from __future__ import annotations

DOCUMENTATION = r'''
module: system_packages
short_description: Make Debian packages present; apt-get runs only when one is missing
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - Reads which of O(names) dpkg has installed (C(dpkg-query)), and runs C(apt-get install) for the missing ones
    alone. A host that has them all needs no apt index, nor C(python3-apt) (which ansible.builtin.apt installs
    from the network first), as the containers of a site whose base image has them and the local fleet's.
  - The role C(eagle3.extraction.ml_env) installs O(names) from its C(ml_env_system_packages) this way (Mooncake's
    wheels link against C(libibverbs1), C(libnuma1) and C(libcurl4)).
options:
  names:
    description: Debian package names (lower case letters, digits, C(+), C(-) and C(.)).
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds C(apt-get install) may take.
    type: int
    default: 900
attributes:
  check_mode:
    support: full
    details: Says what would be installed; runs nothing.
  diff_mode:
    support: none
  platform:
    platforms: debian
extends_documentation_fragment:
  - eagle3.extraction.attributes
'''

EXAMPLES = r'''
- name: What Mooncake's wheels link against
  eagle3.extraction.system_packages:
    names: [libibverbs1, libnuma1, libcurl4]
'''

RETURN = r'''
missing:
  description: The packages that were not installed before (installed now, except in check mode).
  returned: always
  type: list
  elements: str
  sample: [libnuma1]
'''

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.eagle3.extraction.plugins.module_utils.command import CommandTimeout, run

# Debian Policy 5.6.7
NAME = re.compile(r'[a-z0-9][a-z0-9+.-]{1,99}')


def installed(name):
    """Whether dpkg has the package installed (not only known, or removed with its config left)."""
    rc, out, _err = run(['dpkg-query', '-W', '-f=${db:Status-Status}', name], timeout=60)
    return rc == 0 and out.strip() == 'installed'


def main():
    module = AnsibleModule(
        argument_spec={'names': {'type': 'list', 'elements': 'str', 'required': True},
                       'timeout': {'type': 'int', 'default': 900}},
        supports_check_mode=True)
    names = module.params['names']
    bad = [name for name in names if not isinstance(name, str) or not NAME.fullmatch(name)]
    if bad:
        module.fail_json(msg='names: %r is not a Debian package name (lower case letters, digits, + - .)' % bad[0])
    if not 1 <= module.params['timeout'] <= 86400:
        module.fail_json(msg='timeout: %d is not 1 to 86400 seconds' % module.params['timeout'])
    try:
        missing = [name for name in names if not installed(name)]
        if not missing or module.check_mode:
            module.exit_json(changed=bool(missing), missing=missing)
        env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
        rc, out, err = run(['apt-get', 'install', '-y', '-q', '--no-install-recommends'] + missing,
                           timeout=module.params['timeout'], env=env)
    except (CommandTimeout, OSError) as exc:
        module.fail_json(msg='%s' % exc)
    if rc != 0:
        detail = (err or out).strip()[-2000:]
        module.fail_json(msg='apt-get install %s failed (rc %d): %s' % (' '.join(missing), rc, detail),
                         missing=missing)
    module.exit_json(changed=True, missing=missing)


if __name__ == '__main__':
    main()
