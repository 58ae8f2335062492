"""Bench-only: parts of the hidden-state capture switched off while the server runs
(lab/gpu/capture_real_sglang.sh profile; never installed by the collection).

Put on the PYTHONPATH of a capture-on server. When sglang imports
``sglang.srt.eagle3_hs_capture`` its ``on_forward`` reads a variant from the file
named by ``CAPTURE_VARIANT_FILE`` (at most every 0.2 s), so one server measures
every variant and no restart's drift enters the ratios:

  full   the capture as it is
  skip   on_forward returns at once (the model still hands back its aux layers)
  gpu    the GPU work of on_forward (aux layers joined, orig_seq_lens cloned) and
         a staging buffer taken, but no device-to-host copy and no file
  copy   everything up to the device-to-host copy and the dispatcher's wait for it;
         no file (the staging buffer is freed once the copy landed)

Each name may end in ``+whole``: each tensor copied in one piece (470 MB a pass),
as before the capture queued its copy in pieces, to measure both in one run.
"""

import importlib.abc
import importlib.util
import os
import sys
import time

TARGET = "sglang.srt.eagle3_hs_capture"
_STATE = {"name": "full", "read": 0.0}


def variant():
    now = time.monotonic()
    if now - _STATE["read"] > 0.2:
        _STATE["read"] = now
        try:
            with open(os.environ.get("CAPTURE_VARIANT_FILE", "/tmp/capture_variant")) as f:
                _STATE["name"] = f.read().strip() or "full"
        except OSError:
            _STATE["name"] = "full"
    return _STATE["name"]


def _patch(module):
    cls = module.HiddenStateCapture
    on_forward, stitch = cls.on_forward, cls._stitch
    copier_cls = module._HostCopier
    copy = copier_cls.copy

    def patched_on_forward(self, *args, **kwargs):
        if variant().split("+", maxsplit=1)[0] == "skip":
            return None
        return on_forward(self, *args, **kwargs)

    def patched_stitch(self, job):
        if variant().split("+", maxsplit=1)[0] in ("gpu", "copy"):
            return []  # no file: the buffer is freed at once
        return stitch(self, job)

    def patched_copy(self, tensors, hosts):
        name = variant()
        if name.split("+", maxsplit=1)[0] == "gpu":
            return None
        # "+whole": each tensor in one piece, as before the pieces (the issue-21 fix)
        self.chunk_bytes = 1 << 50 if "+whole" in name else module._COPY_CHUNK_BYTES
        return copy(self, tensors, hosts)

    cls.on_forward = patched_on_forward
    cls._stitch = patched_stitch
    copier_cls.copy = patched_copy
    sys.stderr.write(f"capture_variants: {TARGET} patched (variants from "
                     f"{os.environ.get('CAPTURE_VARIANT_FILE', '/tmp/capture_variant')})\n")


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, _Finder())
