# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's half of "converged" (the action plugin converged_state): one sha256 over a
host's inputs, its variables of the collection's roles and this collection's own files, so that a
new value or a new version of the collection runs every role."""

from __future__ import annotations

import hashlib
import json
import os
import re

from ansible_collections.eagle3.extraction.plugins.module_utils.converged_differs import NODE_DID_NOT_ANSWER, NOT_RUNNING
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_listing import no_answer

# the collection's root: plugins/plugin_utils/<this file>
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# what a run executes: a changed task, template or plugin is a changed input
CODE_DIRS = ('playbooks', 'roles', 'plugins')


def code_sha256(directories):
    """One sha256 over the relative path and content of every regular file under ``directories``
    (absolute paths; one that does not exist counts as empty), bytecode left out: the same files
    give the same value wherever they are."""
    total = hashlib.sha256()
    for number, directory in enumerate(directories):
        if not os.path.isabs(directory):
            raise ValueError('%r is not an absolute path' % (directory,))
        total.update(b'dir %d\0' % number)
        for root, dirs, files in os.walk(directory):
            dirs[:] = sorted(name for name in dirs if name != '__pycache__')
            for name in sorted(files):
                path = os.path.join(root, name)
                if name.endswith('.pyc') or not os.path.isfile(path):
                    continue
                content = hashlib.sha256()
                with open(path, 'rb') as handle:
                    for block in iter(lambda: handle.read(1 << 20), b''):
                        content.update(block)
                total.update(os.path.relpath(path, directory).encode('utf-8', 'surrogateescape') + b'\0'
                             + content.digest())
    return total.hexdigest()


def collection_code_sha256(root=ROOT):
    return code_sha256([os.path.join(root, name) for name in CODE_DIRS])


def input_names(names, prefixes):
    """The variables among ``names`` that belong to the roles ``prefixes`` names (``<role>_...``), sorted."""
    pattern = re.compile('^(%s)_' % '|'.join(re.escape(prefix) for prefix in prefixes))
    return sorted(name for name in names if pattern.match(name))


def inputs_sha256(values, code):
    """``values``: ``{variable: value}`` as templated; ``code``: collection_code_sha256()."""
    text = json.dumps({'vars': values, 'code': code}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()


def listed(listing, vmid):
    """(why the container is not compared, or None; its configuration fingerprint) from its hypervisor's pct_list
    result ``listing`` (None when the hypervisor is not in this run; failed or unreachable when it did not answer)."""
    if (listing is not None and not isinstance(listing, dict)) or no_answer(listing, '?'):
        return NODE_DID_NOT_ANSWER, None
    if vmid not in listing['running']:
        return NOT_RUNNING, None
    return None, (listing.get('config_states') or {}).get(str(vmid), '')
