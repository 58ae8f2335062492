# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: extraction_job_dir
short_description: The extraction job's output dir on a host
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - C(<extraction_job_output_root>/<extraction_job_name>), each the host's variable or, where it is not set, the
    extraction_job role's default.
  - The one place that says where a job's shards are; the role, C(status.yml), C(verify.yml) and C(repair.yml) read
    it through this lookup.
"""

EXAMPLES = r"""
- name: Where the job's shard dirs are
  ansible.builtin.debug:
    msg: "{{ lookup('eagle3.extraction.extraction_job_dir') }}"
  # /srv/eagle3-extraction/extraction
"""

RETURN = r"""
_raw:
  description: The job dir's absolute path, one element.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.eagle3.extraction.plugins.plugin_utils.extraction_job import NAMES, job_dir


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms or kwargs:
            raise AnsibleLookupError('extraction_job_dir takes no terms and no options (given: %s)'
                                     % ', '.join([repr(term) for term in terms] + sorted(kwargs)))
        variables = variables or {}
        values = dict((name, self._templar.template(variables[name])) for name in NAMES if name in variables)
        return [job_dir(values)]
