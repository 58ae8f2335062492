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


def test_files_fingerprint_of_digests_read_elsewhere_is_the_fingerprint_of_the_files(tmp_path):
    from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import (
        digest, files_fingerprint, fingerprint)
    present, absent = str(tmp_path / '101.conf'), str(tmp_path / '102.conf')
    (tmp_path / '101.conf').write_text('cores: 2\n')
    for paths in ([present], [absent], [present, absent]):
        assert files_fingerprint(dict((path, digest(path)) for path in paths)) == fingerprint({'files': paths})
    # the path is part of it: the same bytes elsewhere are another fingerprint
    assert files_fingerprint({present: digest(present)}) != files_fingerprint({absent: digest(present)})
