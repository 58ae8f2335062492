"""Fixtures for the capture module's tests (CPU torch, .venv-torch)."""

from __future__ import annotations

import os
import subprocess
import warnings

import pytest

# CPU torch warns at import that NumPy is missing; these tests do not use NumPy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

SGLANG_VERSIONS = ["0.5.14", "0.5.23"]


@pytest.fixture(scope="module", params=SGLANG_VERSIONS)
def patched_source(request):
    """The real deepseek_v2.py of each supported sglang, patched as the role patches it."""
    # imported here, not at the top: pytest imports this file in every venv, torch or not
    # batches puts tests/patch, sglang_source's folder, on sys.path
    import batches  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    import sglang_source  # pylint: disable=import-outside-toplevel
    path = sglang_source.extract(request.param, "sglang/srt/models/deepseek_v2.py")
    with open(path, encoding="utf-8") as f:
        pristine = f.read()
    spec = sglang_source.spec(request.param)
    assert sglang_source.sha256(pristine) == spec["pristine_sha256"]
    return sglang_source.apply(pristine, spec)


@pytest.fixture
def new_capture(tmp_path):
    """Factory for captures that are closed at the end of the test."""
    # torch, as in patched_source
    from batches import capture  # pylint: disable=import-outside-toplevel
    made = []

    def factory(dump_dir=None, **kwargs):
        kwargs.setdefault("metadata", {"layer_ids": [1, 29, 57], "captured_layers": [2, 30, 58]})
        cap = capture.HiddenStateCapture(str(dump_dir or tmp_path / "dump"), **kwargs)
        made.append(cap)
        return cap

    yield factory
    for cap in made:
        cap.close(timeout=10)


def _mount_tmpfs(path, options):
    os.makedirs(path, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()}")


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 1 MiB filesystem, to fill up."""
    path = tmp_path / "small"
    _mount_tmpfs(path, "size=1m")
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def readonly_tmpfs(tmp_path):
    """A real read-only filesystem: not writable even for root."""
    path = tmp_path / "ro"
    _mount_tmpfs(path, "ro,size=64k")
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)
