# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: ml_env_python
short_description: The interpreter of the venv the ml_env role makes
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - The fact C(ml_env_python_bin) when the ml_env role published it (it ran on this host), else
    C(<ml_env_path>/bin/python) with the host's C(ml_env_path), else ml_env's default C(ml_env_path).
  - With O(path), the interpreter of the venv at that path (ml_env computes its own this way).
  - The one place that says where the venv's interpreter is; the roles that run with it default to this lookup.
options:
  path:
    description: A venv's directory; its interpreter is returned, whatever the host's variables say.
    type: path
"""

EXAMPLES = r"""
- name: The interpreter sglang_server, sglang_patch and extraction_job run with
  ansible.builtin.debug:
    msg: "{{ lookup('eagle3.extraction.ml_env_python') }}"
  # /root/ml-env/bin/python

- name: The interpreter of another venv
  ansible.builtin.debug:
    msg: "{{ lookup('eagle3.extraction.ml_env_python', path='/opt/venv') }}"
  # /opt/venv/bin/python
"""

RETURN = r"""
_raw:
  description: The interpreter's absolute path, one element.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.eagle3.extraction.plugins.plugin_utils.ml_env import venv_python


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        unknown = sorted(set(kwargs) - {'path'})
        if terms or unknown:
            raise AnsibleLookupError('ml_env_python takes no terms and only the option path (given: %s)'
                                     % ', '.join([repr(term) for term in terms] + unknown))
        path = kwargs.get('path')
        if path:
            return [venv_python(path)]
        variables = variables or {}
        for name in ('ml_env_python_bin', 'ml_env_path'):
            if name in variables:
                value = self._templar.template(variables[name])
                if value:
                    return [value if name == 'ml_env_python_bin' else venv_python(value)]
        return [venv_python()]
