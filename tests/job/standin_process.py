# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's stand-in SGLang server (lab/standins/sglang_server) as a process on 127.0.0.1,
with the capture deployed as sglang_patch does (<sglang>/srt/eagle3_hs_capture.py, next to a
package that refuses to be imported, as on the fleet): shared by tests/job and tests/online."""
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(ROOT, "lab", "standins", "sglang_server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def standin_server(tmp_path, api_key, env=None, args=()):
    """Yields ``{"url", "dump", "proc", "log"}``; the server is terminated at the end. ``args``: more
    SGLang flags (``--enable-return-hidden-states``...)."""
    site = tmp_path / "site"
    (site / "sglang" / "srt").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text('raise ImportError("the fleet\'s sglang refuses")\n')
    shutil.copy(os.path.join(ROOT, "roles", "sglang_patch", "files", "eagle3_hs_capture.py"),
                site / "sglang" / "srt" / "eagle3_hs_capture.py")
    model = tmp_path / "model"
    shutil.copytree(os.path.join(ROOT, "lab", "fixtures", "model"), model)
    dump = tmp_path / "shm"
    dump.mkdir()
    port = free_port()
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), STANDIN]), SGLANG_HS_DUMP_DIR=str(dump),
                   SGLANG_STANDIN_LOAD_SECONDS="0", SGLANG_STANDIN_MIB="0", SGLANG_STANDIN_NUM_LAYERS="61")
    environ.update(env or {})
    log = open(tmp_path / "server.log", "w")  # pylint: disable=consider-using-with
    proc = subprocess.Popen([sys.executable, "-m", "sglang_standin.launch_server", "--model-path", str(model),
                             "--port", str(port), "--api-key", api_key, "--tp-size", "1", *args],
                            env=environ, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "/health", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                time.sleep(0.1)
        yield {"url": url, "dump": dump, "proc": proc, "log": tmp_path / "server.log"}
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
