# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the online tests share besides fixtures (a module of its own name, not conftest: one
run collects the conftest of tests/job too)."""
import json
import os
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(ROOT, "roles", "extraction_job", "files")
# the stand-in's launcher and the job's helpers are shared with tests/job; this worktree's
# job package before the torch venv's own (editable) install
for path in (os.path.join(ROOT, "tests", "job"), PACKAGE):
    if path not in sys.path:
        sys.path.insert(0, path)

KEY = "gateway-test-key"
JOB = "gw"
LAYER_IDS = [1, 29, 57]   # SpecForge's ids; the stand-in (61 layers) captures 2, 30, 58
HIDDEN = 64               # lab/fixtures/model


def get_json(url, timeout=5):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
