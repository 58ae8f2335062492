# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A file's sha256, read in blocks: the one reader the modules share (verify, repair, the
dataset check, the convergence fingerprint); and the convergence fingerprint of files, globs,
names and trees (converged_state, and pct_list's fingerprint of each container's configuration,
which the next run's converged check compares with the one recorded)."""

from __future__ import annotations

import glob
import hashlib
import json
import os

BLOCK = 1 << 20


def file_sha256(path):
    """The hex sha256 of the file at path (OSError when it cannot be read)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(BLOCK), b''):
            digest.update(block)
    return digest.hexdigest()


def digest(path):
    """The file's sha256, or None when it cannot be read (absent)."""
    try:
        return file_sha256(path)
    except OSError:
        return None


def tree(directory):
    """[relative path, size] of every file under directory, sorted."""
    found = []
    for root, dummy, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            try:
                found.append([os.path.relpath(path, directory), os.path.getsize(path)])
            except OSError:
                continue
    return sorted(found)


def fingerprint(watch):
    """sha256 of everything ``watch`` names, as it is now: ``files`` and ``globs`` by content,
    ``names`` by the names that match, ``trees`` by the names and sizes of their files (each key
    optional)."""
    return _hashed({
        'files': dict((path, digest(path)) for path in watch.get('files', [])),
        'globs': dict((pattern, dict((path, digest(path)) for path in sorted(glob.glob(pattern, recursive=True))))
                      for pattern in watch.get('globs', [])),
        'names': dict((pattern, sorted(os.path.basename(path) for path in glob.glob(pattern)))
                      for pattern in watch.get('names', [])),
        'trees': dict((directory, tree(directory)) for directory in watch.get('trees', [])),
    })


def files_fingerprint(digests):
    """``fingerprint({'files': [...]})`` of files whose sha256 was read elsewhere: ``digests`` is ``{path: hex
    sha256, or None when the file cannot be read}`` (pct_list's action reads them with sha256sum on the node)."""
    return _hashed({'files': dict(digests), 'globs': {}, 'names': {}, 'trees': {}})


def _hashed(seen):
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()
