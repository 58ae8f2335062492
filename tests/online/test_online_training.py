# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SpecForge 0.2.0's real producer, from a venv of the role's pinned CPU set, leases a small conversations
dataset to the capture gateway (in front of the stand-in server) over a real Mooncake store, and the
collection's reader (``python -m eagle3_extraction_job reader``) consumes it: every sample once.

The venv is built once into ``$EAGLE3_ONLINE_VENV_CACHE`` (default /tmp) as
``eagle3-online-venv-<sha256 of requirements-cpu.txt, 16 hex>`` (about a minute from pip's cache), and
reused while the pins stay the same."""
import hashlib
import json
import os
import shutil
import subprocess

import pytest
import yaml

from online_stack import LAYER_IDS, PACKAGE, ROOT

REQUIREMENTS = os.path.join(ROOT, "roles", "online_training", "files", "requirements-cpu.txt")
SAMPLES = 20


@pytest.fixture(scope="module")
def trainer_venv():
    with open(REQUIREMENTS, "rb") as stream:
        key = hashlib.sha256(stream.read()).hexdigest()[:16]
    venv = os.path.join(os.environ.get("EAGLE3_ONLINE_VENV_CACHE", "/tmp"), f"eagle3-online-venv-{key}")
    if not os.path.exists(os.path.join(venv, ".complete")):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run(["python3.11", "-m", "venv", venv],
                       check=True, timeout=300)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--no-deps", "-r", REQUIREMENTS],
                       check=True, timeout=1200)
        open(os.path.join(venv, ".complete"), "w").close()  # pylint: disable=consider-using-with
    return venv


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def test_every_sample_is_consumed_once(tmp_path, trainer_venv, store_info, gateway):
    model = tmp_path / "model"
    shutil.copytree(os.path.join(ROOT, "lab", "fixtures", "model"), model)
    fixture = tmp_path / "fixture"
    subprocess.run([os.path.join(trainer_venv, "bin", "python"), os.path.join(ROOT, "lab", "fixtures", "online_fixture.py"),
                    "--model-dir", str(model), "--out", str(fixture), "--conversations", str(SAMPLES)],
                   check=True, timeout=300, capture_output=True)
    attempt = tmp_path / "run" / "attempt-0001"
    run = {
        "model": {"target_model_path": str(model), "draft_model_config": str(fixture / "draft.json"),
                  "torch_dtype": "float32", "aux_hidden_state_layer_ids": LAYER_IDS,
                  "vocab_mapping_path": str(fixture / "vocab_mapping.pt")},
        "data": {"train_data_path": str(fixture / "conversations.jsonl"), "max_length": 256, "chat_template": "qwen",
                 "build_dataset_num_proc": 1, "cache_dir": str(tmp_path / "cache")},
        "training": {"strategy": "eagle3", "num_epochs": 1, "batch_size": 1, "learning_rate": 1e-4,
                     "attention_backend": "sdpa", "save_interval": 1000, "log_interval": 1},
        "runtime": {"producer_lease": 4, "in_flight_high_watermark": 8, "in_flight_low_watermark": 6},
        "tracking": {"report_to": "none"},
        "run_id": "online-test", "output_dir": str(tmp_path / "output"),
        "deployment": {"mode": "disaggregated", "trainer": {"nnodes": 1, "nproc_per_node": 1},
                       "disaggregated": {"control_dir": str(attempt / "control"),
                                         "consumer_state_dir": str(attempt / "consumer-state"),
                                         "backend": "mooncake", "server_urls": [gateway["url"]],
                                         "mooncake_metadata_server": store_info["metadata_server"],
                                         "mooncake_master_server_addr": store_info["master_server_address"],
                                         "mooncake_protocol": "tcp"}}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    env = dict(os.environ, MOONCAKE_LOCAL_HOSTNAME="127.0.0.1", MC_TCP_BIND_ADDRESS="127.0.0.1",
               MOONCAKE_METADATA_SERVER=store_info["metadata_server"],
               MOONCAKE_MASTER_SERVER_ADDR=store_info["master_server_address"], MOONCAKE_PROTOCOL="tcp",
               MOONCAKE_GLOBAL_SEGMENT_SIZE="0", MOONCAKE_LOCAL_BUFFER_SIZE=str(64 << 20),
               PYTHONPATH=PACKAGE, NO_PROXY="127.0.0.1,localhost")
    bin_dir = os.path.join(trainer_venv, "bin")
    with open(tmp_path / "producer.log", "w") as plog, open(tmp_path / "reader.log", "w") as rlog:
        # the venv's python runs its console script (a moved cache dir keeps working)
        producer = subprocess.Popen([os.path.join(bin_dir, "python"), os.path.join(bin_dir, "specforge"), "train", "-c", str(tmp_path / "run.yaml"),
                                     "--role", "producer"], env=env, stdout=plog, stderr=subprocess.STDOUT)
        reader = subprocess.Popen([os.path.join(bin_dir, "python"), "-m", "eagle3_extraction_job", "reader",
                                   "--config", str(tmp_path / "run.yaml")], env=env, stdout=rlog, stderr=subprocess.STDOUT)
        try:
            rc = reader.wait(240)
            producer_rc = producer.wait(120)
        finally:
            _stop(reader)
            _stop(producer)
    logs = (tmp_path / "producer.log").read_text()[-4000:] + (tmp_path / "reader.log").read_text()[-4000:]
    assert rc == 0 and producer_rc == 0, logs
    records = [json.loads(line) for line in (tmp_path / "output" / "online-test-reader" / "attempt-0001" / "records.jsonl")
               .read_text().splitlines()]
    ids = [record["sample_id"] for record in records]
    assert len(ids) == SAMPLES and len(set(ids)) == SAMPLES, logs
    assert all(record["server"] == gateway["url"] for record in records)
    for record in records:
        # the ref's names (SpecForge's eagle3 features): the capture layers concatenated, the last hidden state
        aux, last = record["features"]["hidden_state"], record["features"]["target"]
        assert aux["shape"][-1] == 64 * len(LAYER_IDS) and last["shape"][-1] == 64
        assert aux["shape"][1] == record["features"]["input_ids"]["shape"][1] and len(aux["sha256"]) == 64
    progress = json.loads((tmp_path / "output" / "online-test-reader" / "attempt-0001" / "progress.json").read_text())
    assert progress["state"] == "done" and progress["consumed"] == SAMPLES
    control = attempt / "control" / "refs.jsonl"
    assert os.path.exists(str(control) + ".consumer_done") and not os.path.exists(str(control) + ".failed")
