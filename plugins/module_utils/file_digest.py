# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A file's sha256, read in blocks: the one reader the modules share (verify, repair, the
dataset check, the convergence fingerprint)."""

from __future__ import annotations

import hashlib

BLOCK = 1 << 20


def file_sha256(path):
    """The hex sha256 of the file at path (OSError when it cannot be read)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(BLOCK), b''):
            digest.update(block)
    return digest.hexdigest()
