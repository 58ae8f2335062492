# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway that starts deletes the dumps of its job an earlier gateway process left unanswered
(the producer leases those prompts again), and only those: a files-mode job's dumps, another
job's, the capture's temporary files and its own files stay. The count is in /status."""
import json
import sys
import types

import pytest

from online_stack import JOB
from eagle3_extraction_job import gateway, gateway_config, names

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def started(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    cfg = gateway_config.from_dict({
        "job": JOB, "server_url": "http://127.0.0.1:1", "dump_dir": str(dump),
        "rejected_dir": str(tmp_path / "rejected"),
        "mooncake": {"local_hostname": "127.0.0.1", "metadata_server": "http://127.0.0.1:2/metadata",
                     "master_server_address": "127.0.0.1:3"}})
    torch = types.SimpleNamespace(set_num_threads=lambda n: None)
    writer = types.SimpleNamespace(ready=False)
    made = gateway.Gateway(cfg, torch, writer=writer)
    yield made, dump
    made.pool.shutdown()


def test_only_the_gateway_s_unanswered_dumps_are_deleted(started):
    made, dump = started
    unanswered = [dump / names.dump_name_for(JOB, TOKEN), dump / names.dump_name_for(JOB, "f" * 32)]
    kept = [dump / names.dump_name_for(JOB, "sample_17"),        # a files-mode job's sample
            dump / names.dump_name_for("otherjob", TOKEN),       # another job's
            dump / (names.dump_name_for(JOB, TOKEN[:-1] + "0") + ".123.ab.tmp"),  # a capture being written
            dump / "CAPTURE_STATS.json"]
    for path in unanswered + kept:
        path.write_bytes(b"x")
    assert made.delete_unanswered_dumps() == 2
    assert sorted(p.name for p in dump.iterdir()) == sorted(p.name for p in kept)
    assert made.snapshot()["unanswered_dumps_deleted"] == 2


def test_no_dump_dir_yet_deletes_nothing(started):
    made, dump = started
    dump.rmdir()
    assert made.delete_unanswered_dumps() == 0
    assert made.snapshot()["unanswered_dumps_deleted"] == 0


def test_gateway_check_imports_mooncake_and_refuses_a_bad_config(tmp_path, monkeypatch):
    from eagle3_extraction_job import cli  # pylint: disable=import-outside-toplevel
    good = {"job": JOB, "server_url": "http://127.0.0.1:1", "dump_dir": str(tmp_path / "dump"),
            "rejected_dir": str(tmp_path / "rejected"),
            "mooncake": {"local_hostname": "127.0.0.1", "metadata_server": "http://127.0.0.1:2/metadata",
                         "master_server_address": "127.0.0.1:3"}}
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(good))
    assert cli.main(["gateway-check", "--config", str(path)]) == 0
    # the venv without Mooncake's client: refused, naming it
    monkeypatch.setitem(sys.modules, "mooncake.store", None)
    assert cli.main(["gateway-check", "--config", str(path)]) == 2
    monkeypatch.undo()
    path.write_text(json.dumps(dict(good, listen_port=0)))
    assert cli.main(["gateway-check", "--config", str(path)]) == 2
