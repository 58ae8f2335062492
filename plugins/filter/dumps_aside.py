# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters dumps_aside and dumps_aside_glob: the name a dump dir is moved aside to, and the glob of
those names, from module_utils/dumps.py (the one owner of that contract between the sglang_server role
and the extraction job)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.module_utils.dumps import ASIDE_TIME, aside_dir, aside_glob


def _dump_dir(value, name):
    if not isinstance(value, str) or not value.startswith('/'):
        raise AnsibleFilterError('%s: the input must be the dump dir, an absolute path (got %r)' % (name, value))
    return value


def dumps_aside(dump_dir, when):
    """``<dump dir>`` + ASIDE + ``<when as ASIDE_TIME>`` (module_utils/dumps.py)."""
    try:
        return aside_dir(_dump_dir(dump_dir, 'dumps_aside'), when)
    except (TypeError, ValueError):
        raise AnsibleFilterError('dumps_aside: the time must be a datetime (now(utc=true)) or a string %s, not %r'
                                 % (ASIDE_TIME, when)) from None


def dumps_aside_glob(dump_dir):
    """The glob of every name dumps_aside gives ``dump_dir``."""
    return aside_glob(_dump_dir(dump_dir, 'dumps_aside_glob'))


class FilterModule(object):
    def filters(self):
        return {'dumps_aside': dumps_aside, 'dumps_aside_glob': dumps_aside_glob}
