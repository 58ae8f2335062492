# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online mode's tests (the torch venv, with SpecForge 0.2.0 and Mooncake's CUDA-less
client and master): a real Mooncake store, the stand-in SGLang server with the capture, and
the capture gateway, each a process on free ports of 127.0.0.1, driven by SpecForge's own
producer-side adapter and read back with SpecForge's own store."""
import json
import os
import subprocess
import sys
import time

import pytest

# (no importorskip here: this conftest is loaded in the controller's venv too, where tests/conftest.py leaves the
# suite out; the torch venv has Mooncake and SpecForge: lab/bootstrap/torch-venv.sh)
# online_stack first: it puts tests/job (standin_process) on the path, which a run of tests/online alone needs
from online_stack import HIDDEN, JOB, KEY, LAYER_IDS, PACKAGE, get_json  # isort: skip
from mooncake_processes import mooncake_store
from standin_process import free_port, standin_server


@pytest.fixture(scope="module")
def store_info(tmp_path_factory):
    with mooncake_store(str(tmp_path_factory.mktemp("mooncake"))) as info:
        yield info


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with standin_server(tmp_path_factory.mktemp("sglang"), KEY,
                        {"SGLANG_HS_LAYER_IDS": ",".join(map(str, LAYER_IDS))}) as running:
        yield running


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, store_info, server):
    """The gateway as its unit runs it: ``python -m eagle3_extraction_job gateway --config``."""
    work = tmp_path_factory.mktemp("gateway")
    key_file = work / "api_key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    port = free_port()
    cfg = {"job": JOB, "server_url": server["url"], "dump_dir": str(server["dump"]),
           "rejected_dir": str(work / "rejected"), "api_key_file": str(key_file),
           "listen_host": "127.0.0.1", "listen_port": port, "layer_ids": LAYER_IDS,
           "hidden_size": HIDDEN, "ack_timeout": 30.0, "stop_timeout": 30.0,
           "mooncake": {"local_hostname": "127.0.0.1", "metadata_server": store_info["metadata_server"],
                        "master_server_address": store_info["master_server_address"],
                        "local_buffer_size": 64 << 20}}
    (work / "gateway.json").write_text(json.dumps(cfg))
    log = open(work / "gateway.log", "w")  # pylint: disable=consider-using-with
    env = dict(os.environ, PYTHONPATH=PACKAGE)
    proc = subprocess.Popen([sys.executable, "-m", "eagle3_extraction_job", "gateway", "--config",
                             str(work / "gateway.json")], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            assert proc.poll() is None, (work / "gateway.log").read_text()
            try:
                if get_json(url + "/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, (work / "gateway.log").read_text()
            time.sleep(0.2)
        yield {"url": url, "proc": proc, "log": work / "gateway.log", "rejected": work / "rejected",
               "dump": server["dump"]}
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        log.close()
