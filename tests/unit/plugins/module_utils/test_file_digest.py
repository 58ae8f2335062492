"""module_utils/file_digest: a file's sha256 in blocks, equal to hashlib's of the whole bytes."""

from __future__ import annotations

import hashlib

import pytest

from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import BLOCK, file_sha256


@pytest.mark.parametrize('size', [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 7])
def test_the_sha256_of_the_whole_file(tmp_path, size):
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    path = tmp_path / 'f'
    path.write_bytes(data)
    assert file_sha256(str(path)) == hashlib.sha256(data).hexdigest()


def test_a_missing_file_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        file_sha256(str(tmp_path / 'missing'))
