"""Tests of the stand-in nvidia-smi against the real captures in lab/fixtures/nvidia-smi.

Every test runs the script as a subprocess through its #!/usr/bin/python3 line, with
its config, state and data paths pointed into tmp_path by environment variables.
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "lab/fixtures/nvidia-smi"
CAPTURES = FIXTURES / "h200x2"
STANDIN = REPO / "lab/standins/nvidia_smi/nvidia-smi"
CONTROL = STANDIN.with_name("nvidia-smi-standin")
INSTALL = STANDIN.with_name("install.sh")

CAPTURED_PID = 592
HOLDER_MIB = 20998
FULL_QUERY = (
    "--query-gpu=index,uuid,name,driver_version,memory.total,memory.used,memory.free,"
    "utilization.gpu,power.draw,temperature.gpu,persistence_mode,pci.bus_id,compute_mode"
)
APPS_QUERY = "--query-compute-apps=pid,process_name,used_memory,gpu_uuid"
# Captures of other tools than nvidia-smi: not replayed; the holder's fd side is
# checked in test_holder_opens_the_device_files instead.
NOT_NVIDIA_SMI = {
    "idle/proc-driver-nvidia-version.txt",
    "idle/ls-dev-nvidia.txt",
    "idle/proc-devices-nvidia.txt",
    "idle/pynvml-driver-count.txt",
    "busy/fuser-v-dev-nvidia.txt",
    "busy/proc-pid-fd-nvidia.txt",
}


def index_rows():
    """(argv after `nvidia-smi`, capture file, exit code) for every nvidia-smi row of INDEX.md."""
    rows = re.findall(r"^\| `(.+)` \| (\S+) \| (\d+) \|$", (CAPTURES / "INDEX.md").read_text(), re.M)
    found = [(shlex.split(cmd)[1:], file, int(code)) for cmd, file, code in rows if cmd.startswith("nvidia-smi")]
    # `-q -x` is named in the INDEX text rather than its table.
    return found + [(["-q", "-x"], "idle/nvidia-smi-q.xml", 0)]


def rows_in(state):
    return [row for row in index_rows() if row[1].startswith(state)]


class Standin:
    """One isolated stand-in: its own config, state and device directory under tmp_path."""

    def __init__(self, tmp_path):
        self.conf = tmp_path / "standin.conf"
        self.dev = tmp_path / "dev"
        self.env = dict(
            os.environ,
            NVIDIA_SMI_STANDIN_CONF=str(self.conf),
            NVIDIA_SMI_STANDIN_STATE=str(tmp_path / "run/state.json"),
            NVIDIA_SMI_STANDIN_DATA=str(FIXTURES),
        )
        self.holders = []

    def run(self, *argv):
        """nvidia-smi with stdout and stderr together, as the captures hold them."""
        return subprocess.run([STANDIN, *argv], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)

    def control(self, *argv, check=True):
        return subprocess.run([CONTROL, *argv], env=self.env, capture_output=True, text=True, check=check)

    def memory_used(self):
        out = self.run("--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout
        return [int(x) for x in out.split()]

    def start_holder(self, gpus, mib, *flags):
        """A real process holding GPU memory; argv[0] "python3" as in the capture."""
        proc = subprocess.Popen(
            ["python3", CONTROL, "hold", "--gpu", gpus, "--mib", str(mib), *flags],
            executable="/usr/bin/python3",
            env=self.env,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.holders.append(proc)
        return proc

    def wait_registered(self, proc):
        line = proc.stdout.readline()
        assert line.startswith(f"holding pid={proc.pid} "), line
        return line

    def hold(self, gpus, mib, *flags):
        proc = self.start_holder(gpus, mib, *flags)
        self.wait_registered(proc)
        return proc

    def stop_all(self):
        for proc in self.holders:
            proc.kill()
            proc.wait()
            proc.stdout.close()


@pytest.fixture
def standin(tmp_path):
    s = Standin(tmp_path)
    yield s
    s.stop_all()


def capture(name):
    return (CAPTURES / name).read_bytes()


def with_pid(data, pid):
    """A busy capture with the captured holder's PID replaced, keeping the table's alignment."""
    data = data.replace(b"%15d      C" % CAPTURED_PID, b"%15d      C" % pid)
    return re.sub(rb"(?m)^%d, " % CAPTURED_PID, b"%d, " % pid, data)


# ---------------------------------------------------------------- the captures


def test_every_capture_is_replayed_or_accounted_for():
    replayed = {row[1] for row in index_rows()}
    on_disk = {str(p.relative_to(CAPTURES)) for p in CAPTURES.rglob("*") if p.is_file()} - {"INDEX.md"}
    assert replayed.isdisjoint(NOT_NVIDIA_SMI)
    assert on_disk == replayed | NOT_NVIDIA_SMI
    assert {"idle", "busy", "errors"} == {file.split("/")[0] for file in replayed}


@pytest.mark.parametrize(("argv", "file", "code"), rows_in("idle") + rows_in("errors"), ids=str)
def test_idle_and_error_captures_byte_for_byte(standin, argv, file, code):
    result = standin.run(*argv)
    assert result.stdout == capture(file)
    assert result.returncode == code


def test_busy_captures_with_a_live_holder_then_freed_by_kill(standin):
    holder = standin.hold("0,1", HOLDER_MIB, "--ignore-sigterm")
    for argv, file, code in rows_in("busy"):
        result = standin.run(*argv)
        assert result.stdout == with_pid(capture(file), holder.pid), file
        assert result.returncode == code

    # Ignoring SIGTERM, as the captured holder did: still there, still holding.
    holder.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    assert holder.poll() is None
    assert standin.memory_used() == [HOLDER_MIB + 9] * 2

    holder.kill()
    holder.wait()
    assert standin.memory_used() == [0, 0]
    assert standin.run(APPS_QUERY, "--format=csv").stdout == capture("idle/query-compute-apps.csv")
    assert standin.run(APPS_QUERY, "--format=csv,noheader,nounits").stdout == b""
    assert standin.run().stdout == capture("idle/nvidia-smi.txt")


def test_zombie_holder_counts_as_freed(standin):
    holder = standin.hold("0", 1000)
    holder.kill()  # not reaped yet: a zombie still has /proc/<pid>
    deadline = time.monotonic() + 5
    while Path(f"/proc/{holder.pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert standin.memory_used() == [0, 0]
    assert standin.run(APPS_QUERY, "--format=csv,noheader").stdout == b""


def test_concurrent_registrations_all_count(standin):
    procs = [standin.start_holder("0,1", 1000) for _holder in range(6)]
    for proc in procs:
        standin.wait_registered(proc)
    assert standin.memory_used() == [6 * 1000 + 9] * 2
    apps = standin.run(APPS_QUERY, "--format=csv,noheader,nounits").stdout.decode().splitlines()
    assert sorted(int(line.split(", ")[0]) for line in apps) == sorted([p.pid for p in procs] * 2)
    procs[0].kill()
    procs[0].wait()
    assert standin.memory_used() == [5 * 1000 + 9] * 2


# ---------------------------------------------------------------- composed queries


def full_capture_columns():
    """{field: (header, [values])} from the full --query-gpu capture."""
    header, *rows = capture("idle/query-gpu-full.csv").decode().splitlines()
    fields = FULL_QUERY.split("=")[1].split(",")
    cells = [row.split(", ") for row in rows]
    return {f: (h, [c[i] for c in cells]) for i, (f, h) in enumerate(zip(fields, header.split(", ")))}


@pytest.mark.parametrize("fmt", ["csv", "csv,noheader", "csv,nounits", "csv,noheader,nounits", "nounits,csv"])
def test_composed_query_gpu_matches_the_full_capture(standin, fmt):
    columns = full_capture_columns()
    fields = ["pci.bus_id", "memory.used", "index", "power.draw", "temperature.gpu", "utilization.gpu"]
    lines = [] if "noheader" in fmt else [", ".join(columns[f][0] for f in fields)]
    for gpu in range(2):
        values = []
        for f in fields:
            header, cells = columns[f]
            unit = re.search(r"\[(.+)\]$", header)
            value = cells[gpu]
            values.append(value.removesuffix(f" {unit[1]}") if unit and "nounits" in fmt else value)
        lines.append(", ".join(values))
    result = standin.run(f"--query-gpu={','.join(fields)}", f"--format={fmt}")
    assert result.returncode == 0
    assert result.stdout.decode() == "".join(line + "\n" for line in lines)


def test_each_known_field_alone(standin):
    for field, (header, cells) in full_capture_columns().items():
        result = standin.run(f"--query-gpu={field}", "--format=csv")
        assert result.stdout.decode().splitlines() == [header, *cells]


@pytest.mark.parametrize("query", ["--query-gpu=index,fan.speed", "--query-compute-apps=pid,gpu_name"])
def test_unknown_field_is_nvidia_smis_error(standin, query):
    result = standin.run(query, "--format=csv")
    field = query.split(",")[-1]
    assert result.stdout == f'Field "{field}" is not a valid field to query.\n\n'.encode()
    assert result.returncode == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["-q"],
        ["topo"],
        ["-L", "-v"],
        ["--query-gpu=index"],
        ["--query-gpu=index", "--format=tsv"],
        ["--query-gpu", "index", "--format=csv"],
        ["dmon"],
    ],
    ids=" ".join,
)
def test_unsupported_arguments_exit_2_with_a_message(standin, argv):
    result = subprocess.run([STANDIN, *argv], env=standin.env, capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "nvidia-smi (stand-in): unsupported" in result.stderr


def test_xml_only_in_the_captured_state(standin):
    assert standin.run("-q", "-x").stdout == capture("idle/nvidia-smi-q.xml")
    standin.hold("0", 100)
    result = standin.run("-q", "-x")
    assert (result.returncode, b"only captured idle" in result.stdout) == (2, True)


# ---------------------------------------------------------------- configuration


def test_eight_gpus_shape(standin):
    standin.control("set", "gpus=8")
    listing = standin.run("-L").stdout.decode().splitlines()
    assert listing[:2] == capture("idle/nvidia-smi-L.txt").decode().splitlines()
    uuids = [
        re.fullmatch(r"GPU (\d): NVIDIA H200 \(UUID: (GPU-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})\)", line)[2]
        for line in listing
    ]
    assert len(set(uuids)) == 8

    full = standin.run(FULL_QUERY, "--format=csv,noheader").stdout.decode().splitlines()
    assert [row.split(", ")[11] for row in full] == [f"00000000:00:{6 + i:02X}.0" for i in range(8)]
    assert [row.split(", ")[1] for row in full] == uuids

    table = standin.run().stdout.decode().splitlines()
    assert {len(line) for line in table[1:]} == {0, 91}
    assert len(re.findall(r"(?m)^\|\s+\d  NVIDIA H200", "\n".join(table))) == 8

    topo = standin.run("topo", "-m").stdout.decode().splitlines()
    assert (
        topo[0]
        == "\t\x1b[4m" + "\t".join(f"GPU{i}" for i in range(8)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"
    )
    for i in range(8):
        cells = topo[1 + i].split("\t")
        assert cells[1:9] == ["NV18" if i != j else " X " for j in range(8)]
    assert len(standin.run("nvlink", "-s").stdout.decode().splitlines()) == 8 * 19
    assert standin.run("-L").stdout.decode().splitlines() == listing  # deterministic


def test_pcie_topology(standin):
    standin.control("set", "gpus=4", "interconnect=pcie")
    topo = standin.run("topo", "-m").stdout.decode()
    matrix = [line.split("\t")[1:5] for line in topo.splitlines()[1:5]]
    assert matrix == [
        [" X ", "PIX", "SYS", "SYS"],
        ["PIX", " X ", "SYS", "SYS"],
        ["SYS", "SYS", " X ", "PIX"],
        ["SYS", "SYS", "PIX", " X "],
    ]
    assert topo.endswith(capture("idle/topo-m.txt").decode().split("\n\n", 1)[1])
    # Without NVLink, `nvlink -s` lists the GPUs with no links under them.
    assert standin.run("nvlink", "-s").stdout == standin.run("-L").stdout


@pytest.mark.parametrize(("mode", "code"), [("driver-library-mismatch", 18), ("driver-not-loaded", 9)])
def test_reported_failure_modes(standin, mode, code):
    standin.control("set", f"mode={mode}")
    for argv in ([], ["-L"], [FULL_QUERY, "--format=csv"], ["topo", "-m"], ["anything"]):
        result = standin.run(*argv)
        assert result.stdout == (FIXTURES / "reported" / f"{mode}.txt").read_bytes()
        assert result.returncode == code
    standin.control("set", "mode=ok")
    assert standin.run("-L").stdout == capture("idle/nvidia-smi-L.txt")


def test_config_file_forms_and_set(standin):
    standin.conf.write_text('{"gpus": 3, "driver_version": "550.144"}')
    assert len(standin.run("-L").stdout.splitlines()) == 3
    standin.conf.write_text("# key=value works too\ngpus = 4\n")
    assert len(standin.run("-L").stdout.splitlines()) == 4

    standin.control("set", "driver_version=550.144")
    assert standin.conf.read_text() == "gpus=4\ndriver_version=550.144\n"
    table = standin.run().stdout.decode().splitlines()
    assert table[2] == "| NVIDIA-SMI 550.144                Driver Version: 550.144        CUDA Version: 13.0     |"
    assert standin.run("--query-gpu=driver_version", "--format=csv,noheader").stdout == b"550.144\n" * 4

    bad = standin.control("set", "gpus=lots", check=False)
    assert (bad.returncode, "gpus must be a number" in bad.stderr) == (1, True)
    assert standin.conf.read_text() == "gpus=4\ndriver_version=550.144\n"
    standin.conf.write_text("colour=green\n")
    result = subprocess.run([STANDIN, "-L"], env=standin.env, capture_output=True, text=True, check=False)
    assert (result.returncode, "unknown config key 'colour'" in result.stderr) == (2, True)


# ---------------------------------------------------------------- control CLI


def test_alloc_defaults_to_the_calling_process_and_free(standin):
    # The shell calling alloc is the holder: while it runs, memory is used; when it ends, freed.
    script = f"{CONTROL} alloc --gpu 1 --mib 512 && {STANDIN} --query-gpu=memory.used --format=csv,noheader,nounits && echo $$"
    out = subprocess.run(["sh", "-c", script], env=standin.env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[:2] == ["0", str(512 + 9)]
    assert standin.memory_used() == [0, 0]

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        standin.control("alloc", "--gpu", "all", "--mib", "100", "--pid", str(sleeper.pid))
        standin.control("alloc", "--gpu", "0", "--mib", "50", "--pid", str(sleeper.pid))
        assert standin.memory_used() == [150 + 9, 100 + 9]
        apps = standin.run(APPS_QUERY, "--format=csv,noheader").stdout.decode().splitlines()
        assert [line.split(", ")[2] for line in apps] == ["150 MiB", "100 MiB"]
        assert json.loads(standin.control("status").stdout)["registrations"][0]["pid"] == sleeper.pid
        standin.control("free", "--pid", str(sleeper.pid))
        assert standin.memory_used() == [0, 0]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_alloc_refuses_dead_processes_and_beyond_free_memory(standin):
    dead = subprocess.Popen(["true"])
    dead.wait()
    result = standin.control("alloc", "--gpu", "0", "--mib", "1", "--pid", str(dead.pid), check=False)
    assert (result.returncode, "is not running" in result.stderr) == (1, True)
    holder = standin.hold("0", 140000)
    result = standin.control("alloc", "--gpu", "0", "--mib", "4000", "--pid", str(holder.pid), check=False)
    assert (result.returncode, "out of memory on GPU 0" in result.stderr) == (1, True)
    result = standin.control("alloc", "--gpu", "2", "--mib", "1", check=False)
    assert result.returncode == 2 and "no GPU 2" in result.stderr


def test_holder_opens_the_device_files(standin):
    standin.dev.mkdir()
    standin.control("set", f"dev_dir={standin.dev}")
    devices = standin.control("devices").stdout.split()
    assert devices == [str(standin.dev / n) for n in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm")]
    for path in devices:
        Path(path).touch()
    holder = standin.hold("1", 10)
    fd_dir = Path(f"/proc/{holder.pid}/fd")
    targets = {os.readlink(fd_dir / fd) for fd in os.listdir(fd_dir)}
    assert set(devices) - targets == {str(standin.dev / "nvidia0")}
    if shutil.which("fuser"):
        result = subprocess.run(["fuser", str(standin.dev / "nvidia1")], capture_output=True, text=True, check=False)
        assert result.stdout.split() == [str(holder.pid)]


# ---------------------------------------------------------------- install.sh


def test_install_uninstall_purge(tmp_path):
    root = tmp_path / "rootfs"
    subprocess.run([INSTALL, "--root", root, "--gpus", "8", "--dev-files"], check=True)
    for name in ("nvidia-smi", "nvidia-smi-standin"):
        assert (root / "usr/bin" / name).read_bytes() == STANDIN.read_bytes()
        assert os.access(root / "usr/bin" / name, os.X_OK)
    assert (root / "etc/nvidia-smi-standin.conf").read_text() == "gpus=8\n"
    tmpfiles = (root / "etc/tmpfiles.d/nvidia-smi-standin.conf").read_text().splitlines()
    assert tmpfiles[0] == "f /dev/nvidia0 0666 root root -" and len(tmpfiles) == 10

    env = dict(
        os.environ,
        NVIDIA_SMI_STANDIN_CONF=str(root / "etc/nvidia-smi-standin.conf"),
        NVIDIA_SMI_STANDIN_STATE=str(tmp_path / "state.json"),
        NVIDIA_SMI_STANDIN_DATA=str(root / "usr/share/nvidia-smi-standin"),
    )
    topo = subprocess.run([root / "usr/bin/nvidia-smi", "topo", "-m"], env=env, capture_output=True, check=True)
    assert topo.stdout.count(b"NV18") == 8 * 7

    subprocess.run([INSTALL, "--root", root, "--uninstall"], check=True)
    assert not (root / "usr/bin/nvidia-smi").exists()
    assert (root / "usr/bin/nvidia-smi-standin").exists()
    subprocess.run([INSTALL, "--root", root, "--purge"], check=True)
    assert [p for p in root.rglob("*") if not p.is_dir()] == []
