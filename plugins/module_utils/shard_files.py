# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading what the extraction job leaves in a shard's output dir, for status, verify and repair.

The job (role ``extraction_job``, package ``eagle3_extraction_job``) writes into each shard's
output dir: ``status.json`` (progress), ``dataset_card.json`` (provenance and totals),
``manifest.sqlite`` (table ``samples``: sample_id, idx, path, state, tokens, bytes, sha256) and the
``.ckpt`` files. Standard library only: this runs on the containers with whatever Python Ansible
finds there.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat

from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import file_sha256

STATUS = 'status.json'
CARD = 'dataset_card.json'
MANIFEST = 'manifest.sqlite'
# the most of a status.json or dataset card read: a damaged or foreign file must not fill the memory
STATUS_MAX_BYTES = 1 << 20
# file_problem's word for a file that is not there (the repair needs no move for it)
MISSING = 'is missing'


def read_regular(path, limit):
    """A regular file's text, at most ``limit`` bytes; never blocks on a FIFO or a device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_NOFOLLOW', 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError('not a regular file')
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError('larger than %d bytes' % limit)
    return data.decode('utf-8')


def read_json(path):
    """The JSON in a small regular file (status.json, dataset_card.json); raises OSError or ValueError."""
    return json.loads(read_regular(path, STATUS_MAX_BYTES))


def read_card(shard_dir):
    """The shard's dataset_card.json as a dict; raises OSError or ValueError (also when it is no JSON object)."""
    card = read_json(os.path.join(shard_dir, CARD))
    if not isinstance(card, dict):
        raise ValueError('not a JSON object')
    return card


def read_manifest(manifest, *queries):
    """The rows of each query over the job's manifest, a list per query; raises sqlite3.Error."""
    db = sqlite3.connect(manifest)
    try:
        return [list(db.execute(query)) for query in queries]
    finally:
        db.close()


def config_output_dir(config):
    """The shard's output dir named by the job's config file at path config; None when the file
    cannot be read or names no absolute path."""
    try:
        with open(config, encoding='utf-8') as handle:
            value = json.load(handle).get('output_dir')
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and os.path.isabs(value) else None


def file_problem(shard_dir, relpath, nbytes, sha, checksums=True):
    """What is wrong with a ``done`` row's file (its size, its sha256 with ``checksums``), or ``None``.

    The one check of a finished file: verify reports it, the repair redoes the sample."""
    path = os.path.join(shard_dir, relpath)
    try:
        size = os.path.getsize(path)
    except OSError:
        return MISSING
    if size != nbytes:
        return 'has %d bytes, the manifest %d' % (size, nbytes)
    if checksums and file_sha256(path) != sha:
        return 'does not match its sha256'
    return None
