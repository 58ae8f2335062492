# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The extraction_job role on localhost (every path under a temp dir, no systemd): preflight,
install and configure, twice (the second changes nothing); then the installed program is run
as its unit would run it, from its config, against the stand-in server."""
import asyncio
import json
import os
import stat
import subprocess
import threading

import pytest

from conftest import ROOT, StandinServer, make_samples, write_dataset

PLAYBOOK_BIN = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK_BIN),
                                reason="the controller venv (.venv) is not built")
KEY = "k3y-that-must-not-leak"


class ServerThread:
    """The stand-in server on its own loop in a thread, for a program run as a subprocess."""

    def __init__(self, dump_dir):
        self.loop = asyncio.new_event_loop()
        self.server = StandinServer(dump_dir, api_key=KEY)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        return self.server

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def run_role(tmp, extra):
    playbook = tmp / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n"
        "    - eagle3.extraction.extraction_job\n")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=os.path.join(ROOT, ".venv", "bin") + ":" + os.environ["PATH"])
    argv = [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", str(playbook),
            # no systemd here: the run step is left out (and only it)
            "--tags", "extraction_job_preflight,extraction_job_install,extraction_job_configure",
            "-e", json.dumps(extra)]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_role_installs_configures_and_the_unit_command_extracts(job_dirs):
    tmp = job_dirs["root"]
    samples = make_samples(20)
    dataset = write_dataset(tmp / "controller-dataset.jsonl", samples)
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 16}))
    with ServerThread(job_dirs["dump"]) as server:
        extra = {
            "extraction_job_dataset": str(dataset), "extraction_job_name": "testjob",
            "extraction_job_shard_indexes": [0, 2], "extraction_job_shard_count": 3,
            "extraction_job_output_root": str(tmp / "srv"), "extraction_job_server_url": server.url,
            "extraction_job_dump_dir": job_dirs["dump"], "extraction_job_model_path": str(model),
            "extraction_job_api_key": KEY, "extraction_job_python": os.path.join(
                ROOT, ".venv-torch", "bin", "python"),
            "extraction_job_install_dir": str(tmp / "opt"), "extraction_job_config_dir": str(tmp / "etc"),
            "extraction_job_data_dir": str(tmp / "var"), "extraction_job_log_dir": str(tmp / "log"),
            "extraction_job_systemd_dir": str(tmp / "systemd"),
            "extraction_job_output_free_floor_gib": 0, "extraction_job_output_free_resume_gib": 0,
            "extraction_job_shm_high": 1.0, "extraction_job_shm_low": 1.0,
            # SpecForge's qwen3-instruct markers as they are, newlines included
            "extraction_job_chat_assistant_header": "<|im_start|>assistant\n",
            "extraction_job_chat_end_of_turn": "<|im_end|>\n",
            "extraction_job_chat_ignore_tokens": ["<think>\n\n</think>\n\n"],
        }
        (tmp / "systemd").mkdir()
        first = run_role(tmp, extra)
        assert first.returncode == 0, first.stdout + first.stderr
        assert KEY not in first.stdout + first.stderr
        assert "changed=0" not in first.stdout   # the role did run
        second = run_role(tmp, extra)
        assert second.returncode == 0 and "changed=0" in second.stdout, second.stdout

        key_file = tmp / "etc" / "testjob.key"
        assert key_file.read_text().strip() == KEY
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tmp / "etc").st_mode) == 0o700
        unit = (tmp / "systemd" / "eagle3-extraction-job@.service").read_text()
        assert KEY not in unit and "RestartPreventExitStatus=2" in unit
        exec_start = [line for line in unit.splitlines() if line.startswith("ExecStart=")][0]
        assert exec_start.endswith(f"-m eagle3_extraction_job run --config {tmp}/etc/%i.json")
        configs = {}
        for index in (0, 2):
            cfg = json.loads((tmp / "etc" / f"testjob-shard-{index}.json").read_text())
            assert KEY not in json.dumps(cfg)
            assert cfg["shard_index"] == index and cfg["shard_count"] == 3
            assert cfg["output_dir"] == f"{tmp}/srv/testjob/shard-{index}-of-3"
            assert cfg["dataset"] == f"{tmp}/var/testjob.jsonl"
            assert (cfg["chat_assistant_header"], cfg["chat_end_of_turn"]) == (
                "<|im_start|>assistant\n", "<|im_end|>\n")
            assert cfg["chat_ignore_tokens"] == ["<think>\n\n</think>\n\n"]
            configs[index] = cfg
        assert (tmp / "var" / "testjob.jsonl").read_bytes() == dataset.read_bytes()

        # what the unit runs, from the installed copy, for both of this host's shards
        env = dict(os.environ, PYTHONPATH=str(tmp / "opt"))
        for index in (0, 2):
            run = subprocess.run(
                [extra["extraction_job_python"], "-m", "eagle3_extraction_job", "run", "--config",
                 str(tmp / "etc" / f"testjob-shard-{index}.json")],
                cwd=str(tmp / "opt"), env=env, capture_output=True, text=True, timeout=120,
                check=False)
            assert run.returncode == 0, run.stdout + run.stderr
            assert KEY not in run.stdout + run.stderr
    from eagle3_extraction_job import dataset as ds
    expected = {s[0] for s in samples if ds.shard_of(s[0], 3) in (0, 2)}
    assert {r.split("-", 1)[1] for r in server.received} == expected
    for index in (0, 2):
        card = json.loads((tmp / "srv" / "testjob" / f"shard-{index}-of-3" / "dataset_card.json")
                          .read_text())
        assert card["complete"] and card["hidden_size"] == 16 and card["model_config_sha256"]


def test_role_refuses_a_bad_job_name_before_changing_anything(job_dirs):
    tmp = job_dirs["root"]
    dataset = write_dataset(tmp / "d.jsonl", make_samples(2))
    dirs = {k: str(tmp / k.rsplit("_", 2)[-2]) for k in (
        "extraction_job_install_dir", "extraction_job_config_dir", "extraction_job_data_dir",
        "extraction_job_log_dir", "extraction_job_output_root", "extraction_job_systemd_dir")}
    result = run_role(tmp, {"extraction_job_dataset": str(dataset), "extraction_job_name": "bad-name",
                            **dirs})
    assert result.returncode != 0 and "name=bad-name" in result.stdout
    assert not [d for d in dirs.values() if os.path.exists(d)]
