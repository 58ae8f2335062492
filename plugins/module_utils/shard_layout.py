# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one owner of a shard output dir's name: ``<output root>/<job>/shard-<index>-of-<count>``.

The plan (plugin_utils/host_plan.py) names each shard's dir with shard_dir_name; the role passes
that path to the job in its config (``output_dir``), so the job on the host, which cannot import
the collection, never makes the name itself. status, verify, repair and the dataset check find the
dirs with shard_dirs, which reads the names back from the same template. Standard library only:
this runs on the containers with whatever Python Ansible finds there.
"""

from __future__ import annotations

import os
import re

SHARD_DIR_TEMPLATE = 'shard-{index}-of-{count}'


def _name_pattern(template):
    """The regular expression of the names ``template`` makes, its fields as the groups index and count."""
    parts = re.split(r'\{(index|count)\}', template)
    return re.compile(''.join(re.escape(part) if n % 2 == 0 else r'(?P<%s>0|[1-9][0-9]*)' % part
                              for n, part in enumerate(parts)))


_NAME = _name_pattern(SHARD_DIR_TEMPLATE)
# what every shard dir's name starts with: a copy kept beside a shard under another name (a leftover of a
# handover: verify counts it once, or names the disagreement) is listed too
SHARD_DIR_PREFIX = SHARD_DIR_TEMPLATE.split('{', 1)[0]


def shard_dir_name(index, count):
    """The name of shard ``index`` of ``count``'s output dir."""
    return SHARD_DIR_TEMPLATE.format(index=index, count=count)


def shard_of_dir_name(name):
    """``(index, count)`` of a name shard_dir_name made, else None."""
    found = _NAME.fullmatch(name)
    return (int(found.group('index')), int(found.group('count'))) if found else None


def shard_dirs(job_dir):
    """The shard output dirs under ``<output root>/<job>``, sorted."""
    try:
        names = sorted(os.listdir(job_dir))
    except FileNotFoundError:
        return []
    return [os.path.join(job_dir, n) for n in names
            if n.startswith(SHARD_DIR_PREFIX) and os.path.isdir(os.path.join(job_dir, n))]
