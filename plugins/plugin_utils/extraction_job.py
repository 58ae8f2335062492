# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The extraction job's output dir on a host: the one owner of that fact.

``<extraction_job_output_root>/<extraction_job_name>``, each variable the host's or, unset, the
role's argument spec default. It is part of each host's plan (plugin_utils/host_plan.py): the role
(its output, configs and stop), status.yml, verify.yml and repair.yml read it there (the lookup
eagle3.extraction.host_plan's job.dir); none joins it again.

Both values are checked against their records' rules here too: status.yml, verify.yml and repair.yml read the dir
without the role's first check, and a name such as ``../other`` would make them read another job's output.
"""

from __future__ import annotations

import posixpath

from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variables import rule_error

NAMES = ('extraction_job_output_root', 'extraction_job_name')


class JobDirError(ValueError):
    """A name or output root that breaks its rule; the message names the variable and its value."""


def job_dir(values):
    """The job's dir from the variables in values (a mapping; unset or empty ones take the spec's default). Raises
    JobDirError when either breaks its rule (a path in the name, a relative root)."""
    given = dict(spec_defaults('extraction_job', NAMES))
    given.update((name, values[name]) for name in NAMES if values.get(name) not in (None, ''))
    # the text the dir is made of is what the rule sees (an inventory's 2024 is the name '2024')
    used = dict((name, str(given[name])) for name in NAMES)
    for name in NAMES:
        error = rule_error(name, used[name], given[name])
        if error:
            raise JobDirError(error)
    return posixpath.join(used['extraction_job_output_root'].rstrip('/') or '/', used['extraction_job_name'])
