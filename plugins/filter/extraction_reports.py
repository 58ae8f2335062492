# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's half of status.yml and verify.yml: the hosts' reports, as the modules
extraction_status and extraction_verify read them on each host, made into one answer.

- extraction_status_table: one progress table of every host's shards, with the totals.
- extraction_verify_union: every sample exactly once across the hosts, with the line to print.

Filters, so that this half runs on the controller by what it is (the modules run on the hosts
only); the work is module_utils/status_table.py's and module_utils/verify_union.py's.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.module_utils.status_table import status_table
from ansible_collections.eagle3.extraction.plugins.module_utils.verify_union import union_message, verify_union


def _reports(reports, name, wanted, what):
    """The reports as a list of dicts, each with a host name and what ``wanted`` says it holds; else an error
    naming the report."""
    if not isinstance(reports, list):
        raise AnsibleFilterError('%s: expected a list of reports, one a host' % name)
    for n, report in enumerate(reports):
        if not isinstance(report, dict) or not isinstance(report.get('host'), str) or not wanted(report):
            raise AnsibleFilterError('%s: reports[%d]: expected %s' % (name, n, what))
    return reports


def extraction_status_table(reports):
    """``[{host, statuses} or {host, error}]`` -> ``{lines, totals}``."""
    reports = _reports(reports, 'extraction_status_table',
                       lambda r: isinstance(r.get('statuses'), list) or r.get('error'),
                       '{host, statuses} or {host, error}')
    return status_table(reports)


def extraction_verify_union(reports):
    """``[{host, shards}]`` -> ``{totals, problems, notes, msg}``."""
    reports = _reports(reports, 'extraction_verify_union', lambda r: isinstance(r.get('shards'), list),
                       '{host, shards}')
    union = verify_union(reports)
    return dict(union, msg=union_message(union))


class FilterModule(object):
    def filters(self):
        return {'extraction_status_table': extraction_status_table, 'extraction_verify_union': extraction_verify_union}
