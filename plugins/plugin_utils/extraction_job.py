# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The extraction job's output dir on a host: the one owner of that fact.

``<extraction_job_output_root>/<extraction_job_name>``, each variable the host's or, unset, the
role's argument spec default. It is part of each host's plan (plugin_utils/host_plan.py): the role
(its output, configs and stop), status.yml, verify.yml and repair.yml read it there (the lookup
eagle3.extraction.host_plan's job.dir); none joins it again.
"""

from __future__ import annotations

import posixpath

from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults

NAMES = ('extraction_job_output_root', 'extraction_job_name')


def job_dir(values):
    """The job's dir from the variables in values (a mapping; unset or empty ones take the spec's default)."""
    given = dict(spec_defaults('extraction_job', NAMES))
    given.update((name, values[name]) for name in NAMES if values.get(name) not in (None, ''))
    root = str(given['extraction_job_output_root']).rstrip('/') or '/'
    return posixpath.join(root, str(given['extraction_job_name']))
