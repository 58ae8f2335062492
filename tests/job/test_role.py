# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The extraction_job role on localhost (every path under a temp dir, no systemd): preflight,
install and configure, twice (the second changes nothing); then the installed program is run
as its unit would run it, from its config, against the stand-in server. The job goes into a
venv of the test's own, which sees this venv's libraries but not its (editable) job, so that
what runs is what the role installed; an upgrade over an older job leaves none of its modules."""
import asyncio
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import threading

import pytest

from job_helpers import ROOT, StandinServer, make_samples, write_dataset

PLAYBOOK_BIN = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
pytestmark = [pytest.mark.skipif(not os.path.exists(PLAYBOOK_BIN),
                                 reason="the controller venv (.venv) is not built"),
              # the deadline of each test (tests/conftest.py): a venv and a playbook run, 300 s each at most
              pytest.mark.timeout(900)]
KEY = "k3y-that-must-not-leak"
SOURCE = os.path.join(ROOT, "roles", "extraction_job", "files")
WHEEL = "eagle3_extraction_job-{}-py3-none-any.whl"


def make_job_venv(tmp):
    """A venv for the job: this venv's libraries (torch, aiohttp, packaging for ansible.builtin.pip)
    through a folder of links, without this venv's own install of the job."""
    venv = tmp / "job-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    libs = tmp / "libs"
    libs.mkdir()
    purelib = sysconfig.get_paths()["purelib"]
    for entry in os.listdir(purelib):
        if "eagle3_extraction_job" not in entry and not entry.endswith(".pth"):
            os.symlink(os.path.join(purelib, entry), libs / entry)
    site = glob.glob(str(venv / "lib" / "python3*" / "site-packages"))[0]
    with open(os.path.join(site, "torch-venv-libs.pth"), "w", encoding="utf-8") as f:
        f.write(f"{libs}\n")
    return venv


def venv_imports(venv, module, cwd):
    """Whether the venv's python, run where the unit runs, imports the module."""
    run = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {module}"], cwd=cwd,
                         capture_output=True, text=True, timeout=120, check=False)
    return run.returncode == 0


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


def run_role(tmp, extra, tags="extraction_job_preflight,extraction_job_install,extraction_job_configure",
             bin_dir=None):
    playbook = tmp / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n"
        "    - eagle3.extraction.extraction_job\n")
    path = ([str(bin_dir)] if bin_dir else []) + [os.path.join(ROOT, ".venv", "bin"), os.environ["PATH"]]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=":".join(path))
    # no systemd here: the run step is left out (and only it), unless bin_dir holds a stand-in systemctl
    argv = [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", str(playbook), "--tags", tags, "-e", json.dumps(extra)]
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
            "extraction_job_api_key": KEY,
            "extraction_job_python": str(make_job_venv(tmp) / "bin" / "python"),
            "extraction_job_install_dir": str(tmp / "opt"), "extraction_job_config_dir": str(tmp / "etc"),
            "extraction_job_data_dir": str(tmp / "var"), "extraction_job_log_dir": str(tmp / "log"),
            "extraction_job_systemd_dir": str(tmp / "systemd"),
            "extraction_job_output_free_floor_gib": 0, "extraction_job_output_free_resume_gib": 0,
            # the test dirs share a disk others fill: the highest watermarks the rules allow
            "extraction_job_shm_high": 0.99, "extraction_job_shm_low": 0.99,
            # SpecForge's qwen3-instruct markers as they are, newlines included
            "extraction_job_chat_assistant_header": "<|im_start|>assistant\n",
            "extraction_job_chat_end_of_turn": "<|im_end|>\n",
            "extraction_job_chat_ignore_tokens": ["<think>\n\n</think>\n\n"],
            "extraction_job_stall_window": 42, "extraction_job_stall_restarts_max": 5,
            # node_exporter's textfile dir: made by the job when missing
            "extraction_job_metrics_dir": str(tmp / "node-exporter"),
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
        assert KEY not in unit and "Environment=PYTHONPATH" not in unit
        # refused (2) and stalled past the bound (4) are not restarted; stalled (3) and incomplete (1) are
        assert "\nRestartPreventExitStatus=2 4\n" in unit and "\nRestart=on-failure\n" in unit
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
            assert (cfg["stall_window"], cfg["stall_restarts_max"]) == (42.0, 5)
            assert cfg["metrics_dir"] == f"{tmp}/node-exporter"
            configs[index] = cfg
        assert (tmp / "var" / "testjob.jsonl").read_bytes() == dataset.read_bytes()

        # what the unit runs, the job installed in its venv, for both of this host's shards
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
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
        # each shard's Prometheus textfile, its samples done those of its status.json
        status = json.loads((tmp / "srv" / "testjob" / f"shard-{index}-of-3" / "status.json").read_text())
        prom = (tmp / "node-exporter" / f"eagle3_extraction_testjob_shard{index}.prom").read_text()
        assert (f'eagle3_job_samples_done{{extraction_job="testjob",shard="{index}",shard_count="3"}} '
                f'{status["samples_done"]}\n') in prom


def test_role_refuses_a_bad_job_name_before_changing_anything(job_dirs):
    tmp = job_dirs["root"]
    dataset = write_dataset(tmp / "d.jsonl", make_samples(2))
    dirs = {k: str(tmp / k.rsplit("_", 2)[-2]) for k in (
        "extraction_job_install_dir", "extraction_job_config_dir", "extraction_job_data_dir",
        "extraction_job_log_dir", "extraction_job_output_root", "extraction_job_systemd_dir")}
    result = run_role(tmp, {"extraction_job_dataset": str(dataset), "extraction_job_name": "bad-name",
                            **dirs})
    assert result.returncode != 0 and "extraction_job_name='bad-name'" in result.stdout
    assert not [d for d in dirs.values() if os.path.exists(d)]


def test_role_upgrade_leaves_no_module_the_source_removed(job_dirs):
    """Over the job as earlier versions copied it (file by file, into the unit's working dir)
    and over an installed wheel of the same version with one module more: after the role,
    neither module is importable where the unit runs, and a second run changes nothing."""
    tmp = job_dirs["root"]
    venv = make_job_venv(tmp)
    opt = tmp / "opt"
    no_cache = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(os.path.join(SOURCE, "eagle3_extraction_job"), opt / "eagle3_extraction_job",
                    ignore=no_cache)
    (opt / "eagle3_extraction_job" / "legacy_module.py").write_text("")
    old_src = tmp / "old-src"
    shutil.copytree(SOURCE, old_src, ignore=no_cache)
    (old_src / "eagle3_extraction_job" / "removed_module.py").write_text("")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(opt), str(old_src)], check=True, timeout=300)
    from eagle3_extraction_job import __version__  # pylint: disable=import-outside-toplevel
    wheel = opt / WHEEL.format(__version__)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=300)
    # what the upgrade must take away is there before it
    assert venv_imports(venv, "eagle3_extraction_job.removed_module", str(tmp))
    assert venv_imports(venv, "eagle3_extraction_job.legacy_module", str(opt))

    extra = {
        "extraction_job_dataset": str(write_dataset(tmp / "d.jsonl", make_samples(2))),
        "extraction_job_name": "upjob", "extraction_job_hidden_size": 16,
        "extraction_job_server_url": "http://127.0.0.1:9", "extraction_job_dump_dir": job_dirs["dump"],
        "extraction_job_python": str(venv / "bin" / "python"),
        "extraction_job_output_root": str(tmp / "srv"), "extraction_job_install_dir": str(opt),
        "extraction_job_config_dir": str(tmp / "etc"), "extraction_job_data_dir": str(tmp / "var"),
        "extraction_job_log_dir": str(tmp / "log"), "extraction_job_systemd_dir": str(tmp / "systemd"),
    }
    (tmp / "systemd").mkdir()
    first = run_role(tmp, extra)
    assert first.returncode == 0, first.stdout + first.stderr
    for module, cwd in (("removed_module", tmp), ("legacy_module", opt)):
        assert not venv_imports(venv, f"eagle3_extraction_job.{module}", str(cwd)), module
    assert not (opt / "eagle3_extraction_job").exists()
    found = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import eagle3_extraction_job.job as m; print(m.__file__)"],
                           cwd=str(opt), capture_output=True, text=True, timeout=120, check=True)
    assert found.stdout.strip().startswith(str(venv / "lib")), found.stdout
    second = run_role(tmp, extra)
    assert second.returncode == 0 and "changed=0" in second.stdout, second.stdout


def test_state_stopped_runs_through_install_configure_and_stop(job_dirs):
    """extraction_job_state: stopped, a documented value, failed every time after the install: configure registered
    the unit template's result under the name of the dict owned_paths takes (vars/main.yml), and stop.yml handed
    owned_paths a task result. A stand-in systemctl lists no unit (this machine runs no systemd). The stop takes the
    job out of Prometheus: its metrics files go, node_exporter's other files stay."""
    tmp = job_dirs["root"]
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/calls\"\n")
    (bin_dir / "systemctl").chmod(0o755)
    extra = {
        "extraction_job_dataset": str(write_dataset(tmp / "d.jsonl", make_samples(2))),
        "extraction_job_name": "stopjob", "extraction_job_hidden_size": 16, "extraction_job_state": "stopped",
        "extraction_job_server_url": "http://127.0.0.1:9", "extraction_job_dump_dir": job_dirs["dump"],
        "extraction_job_python": str(make_job_venv(tmp) / "bin" / "python"),
        "extraction_job_output_root": str(tmp / "srv"), "extraction_job_install_dir": str(tmp / "opt"),
        "extraction_job_config_dir": str(tmp / "etc"), "extraction_job_data_dir": str(tmp / "var"),
        "extraction_job_log_dir": str(tmp / "log"), "extraction_job_systemd_dir": str(tmp / "systemd"),
    }
    (tmp / "systemd").mkdir()
    # node_exporter's textfile dir: a metrics file the job left, which would go on saying "running", and another
    # collector's
    metrics = tmp / "textfile"
    metrics.mkdir()
    (metrics / "eagle3_extraction_stopjob_shard0.prom").write_text('eagle3_job_state{state="running"} 1\n')
    (metrics / "apt.prom").write_text("apt_upgrades_pending 0\n")
    extra["extraction_job_metrics_dir"] = str(metrics)
    result = run_role(tmp, extra, tags="all", bin_dir=bin_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp / "systemd" / "eagle3-extraction-job@.service").is_file()
    assert sorted(p.name for p in metrics.iterdir()) == ["apt.prom"]
    calls = (bin_dir / "calls").read_text()
    assert "list-units --all --plain --no-legend eagle3-extraction-job@*.service" in calls, calls
