# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The name of a dump dir moved aside: the one owner of that contract.

Before a server starts, the sglang_server role renames a dump dir that still holds dumps to
``<dump dir>.undrained-<UTC time>`` (the filter dumps_aside); the extraction job drains those
dirs too, from the glob the extraction_job role writes into its config (the filter
dumps_aside_glob). Both come from here; no task, template or job module writes the name.
"""

from __future__ import annotations

import datetime
import glob

# <dump dir> + ASIDE + <UTC time as ASIDE_TIME>
ASIDE = '.undrained-'
ASIDE_TIME = '%Y%m%dT%H%M%SZ'


def aside_dir(dump_dir, when):
    """Where ``dump_dir`` is moved aside at ``when`` (a datetime, taken as UTC when naive, or the
    time already written as ASIDE_TIME)."""
    if isinstance(when, datetime.datetime):
        if when.tzinfo is not None:
            when = when.astimezone(datetime.timezone.utc)
        when = when.strftime(ASIDE_TIME)
    else:
        datetime.datetime.strptime(when, ASIDE_TIME)  # ValueError on another format
    return dump_dir.rstrip('/') + ASIDE + when


def aside_glob(dump_dir):
    """A glob that matches every dir ``dump_dir`` was moved aside to (``dump_dir`` itself escaped)."""
    return glob.escape(dump_dir.rstrip('/')) + ASIDE + '*'
