# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real Mooncake store on this machine for the online tests: ``mooncake_master`` (HTTP
metadata server on) and ``mooncake_client`` (the segment holder, as the mooncake_master role
runs it), on free ports: several engineers test on one machine, so never fixed ports. Both
are ended by their pids when the context exits."""
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request

from standin_process import free_port

BIN = os.path.dirname(sys.executable)
SEGMENT = "256 MB"
SEGMENT_BYTES = 256 << 20


def _wait_listening(port, proc, log, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, f"exited {proc.returncode}: {open(log).read()[-3000:]}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"port {port} never listened: {open(log).read()[-3000:]}")


def _capacity(metrics_port):
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        text = opener.open(url, timeout=2).read().decode()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("master_total_capacity_bytes"):
            return float(line.split()[-1])
    return 0


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def mooncake_store(workdir):
    """Yields ``{"metadata_server", "master_server_address", "metrics_port"}`` of a running store."""
    rpc, http, metrics, client = free_port(), free_port(), free_port(), free_port()
    procs = []
    try:
        master_log = os.path.join(workdir, "mooncake_master.log")
        with open(master_log, "w") as log:
            procs.append(subprocess.Popen(
                [os.path.join(BIN, "mooncake_master"), "--enable_http_metadata_server=true",
                 f"--rpc_port={rpc}", f"--http_metadata_server_port={http}",
                 f"--metrics_port={metrics}", "--default_kv_lease_ttl=10000",
                 "--http_metadata_server_host=127.0.0.1"],
                stdout=log, stderr=subprocess.STDOUT, cwd=workdir))
        _wait_listening(rpc, procs[0], master_log)
        _wait_listening(http, procs[0], master_log)
        info = {"metadata_server": f"http://127.0.0.1:{http}/metadata",
                "master_server_address": f"127.0.0.1:{rpc}", "metrics_port": metrics}
        client_log = os.path.join(workdir, "mooncake_client.log")
        with open(client_log, "w") as log:
            procs.append(subprocess.Popen(
                [os.path.join(BIN, "mooncake_client"), "--host=127.0.0.1", f"--port={client}",
                 f"--global_segment_size={SEGMENT}", f"--master_server_address={info['master_server_address']}",
                 f"--metadata_server={info['metadata_server']}", "--protocol=tcp"],
                stdout=log, stderr=subprocess.STDOUT, cwd=workdir))
        deadline = time.time() + 60
        while _capacity(metrics) < SEGMENT_BYTES:
            assert procs[1].poll() is None, open(client_log).read()[-3000:]
            assert time.time() < deadline, "the segment was never mounted: " + open(client_log).read()[-3000:]
            time.sleep(0.2)
        yield info
    finally:
        for proc in reversed(procs):
            _stop(proc)
