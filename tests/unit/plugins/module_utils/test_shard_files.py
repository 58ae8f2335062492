# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/shard_files: what status, verify and repair read of a shard's files."""

from __future__ import annotations

import json

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import config_output_dir


def test_config_output_dir_reads_the_shards_config(tmp_path):
    """What converged_state and extraction_job_outcome read to find a shard's status.json."""
    good, relative, broken = tmp_path / 'good.json', tmp_path / 'relative.json', tmp_path / 'broken.json'
    good.write_text(json.dumps({'output_dir': '/srv/eagle3-extraction/job/shard-0-of-1'}), encoding='utf-8')
    relative.write_text(json.dumps({'output_dir': 'shard-0'}), encoding='utf-8')
    broken.write_text('{', encoding='utf-8')
    assert config_output_dir(str(good)) == '/srv/eagle3-extraction/job/shard-0-of-1'
    assert config_output_dir(str(relative)) is None
    assert config_output_dir(str(broken)) is None
    assert config_output_dir(str(tmp_path / 'missing.json')) is None
