# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the extraction job's tests share (CPU torch venv: lab/bootstrap/torch-venv.sh). A module of its
own name, not conftest: tests/capture has a conftest too, and one run collects both.

The stand-in server here answers ``/generate`` and writes each request's dump
the way the real capture does: the capture module's own file naming
(``roles/sglang_patch/files/eagle3_hs_capture.py``), ``*.tmp`` then rename, the
same keys; its tensors are a function of the token ids, so a test can compare
every output file with what it must hold.
"""
import asyncio
import importlib.util
import json
import os
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
from aiohttp import web

HIDDEN = 16
LAYERS = 3


def load_capture_module():
    path = os.path.join(ROOT, "roles", "sglang_patch", "files", "eagle3_hs_capture.py")
    spec = importlib.util.spec_from_file_location("eagle3_hs_capture", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CAPTURE = load_capture_module()


def expected_tensors(input_ids, hidden=HIDDEN, layers=LAYERS):
    """What the stand-in dumps for these ids: distinct per token, layer and column."""
    ids = torch.tensor(list(input_ids), dtype=torch.int64)
    base = ids[:, None].float() * 0.5 + torch.arange(hidden, dtype=torch.float32)[None, :] * 0.25
    final = base.to(torch.bfloat16).unsqueeze(0)
    aux = torch.cat([(base + 100 * (k + 1)) for k in range(layers)], dim=1)
    return ids, final, aux.to(torch.bfloat16).unsqueeze(0)


def write_dump(dump_dir, rid, input_ids, mutate=None):
    """A dump exactly as the capture writes it (name, temp file, rename, keys)."""
    ids, final, aux = expected_tensors(input_ids)
    payload = {"input_ids": ids, "hidden_state": final, "aux_hidden_state": aux, "rid": rid,
               "layer_ids": [1, 2, 3], "captured_layers": [2, 3, 4], "sglang_version": "0.5.23",
               "model": "DeepseekV3ForCausalLM", "format_version": 1}
    if mutate:
        mutate(payload)
    path = os.path.join(dump_dir, CAPTURE.file_name_for(rid))
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "wb") as f:
        torch.save(payload, f)
    os.replace(tmp, path)
    return path


class StandinServer:
    """``/health`` and ``/generate`` on 127.0.0.1; dumps like the capture."""

    def __init__(self, dump_dir, api_key=""):
        self.dump_dir = dump_dir
        self.api_key = api_key
        self.received = []          # rids, in arrival order
        self.fail_first = 0         # answer 503 to this many requests first
        self.no_dump = set()        # rids answered 200 without a dump
        self.mutate = {}            # rid -> function changing the payload
        self.stop_after = None      # stop dumping (answer 503) after this many requests
        self.delay = 0.0
        self.refuse = {}            # rid -> (status, body text, or bytes sent as they are): answered so, no dump
        self.waiting_at_arrival = []  # per request, the dumps still in the dump dir when it arrived
        self.hold = {}              # rid -> seconds the first copy is worked on
        self.in_flight = set()      # rids being worked on: a second copy gets SGLang's 400
        self.healthy = True         # False: /health answers 503 (a server starting again)
        self.wedged = False         # True: every request is taken and never answered (until stop)
        self._stopping = None
        # return_hidden_states, as SGLang started with --enable-return-hidden-states and the capture on:
        # the aux layers it dumps; off: SGLang's 400; return_other: values other than those dumped
        self.hidden_states_enabled = True
        self.return_other = False
        self.dump_all = None        # a function changing every dump's payload (check prompts too)
        self.checks = []            # rids of the requests asking for hidden states (not in received)
        self.runner = None
        self.url = ""

    def hidden_states_answer(self, body):
        """A return_hidden_states request: dumped like any other, answered with the aux rows."""
        rid = body["rid"]
        self.checks.append(rid)
        if not self.hidden_states_enabled:
            # tokenizer_manager's refusal when the flag is off
            return web.json_response({"error": {"message": (
                "The server is not configured to return the hidden states. Please set "
                "`--enable-return-hidden-states` to enable this feature.")}}, status=400)
        payload = write_dump(self.dump_dir, rid, body["input_ids"], self.dump_all)
        rows = torch.load(payload, weights_only=True)["aux_hidden_state"][0].float()
        if self.return_other:   # one value of the second layer off by one bf16 step
            rows[0, HIDDEN] = rows[0, HIDDEN] + 1.0
        return web.json_response({"text": "x", "meta_info": {"id": rid, "hidden_states": [rows.tolist()]}})

    async def generate(self, request):
        body = await request.json()
        authorized = not self.api_key or request.headers.get("Authorization") == f"Bearer {self.api_key}"
        if body.get("return_hidden_states") and authorized:   # the capture check's: none of the samples' counts
            return self.hidden_states_answer(body)
        self.waiting_at_arrival.append(len([n for n in os.listdir(self.dump_dir) if n.endswith(".pt")]))
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": "unauthorized"}, status=401)
        rid = body["rid"]
        assert body["sampling_params"]["max_new_tokens"] == 1
        if self.fail_first > 0:
            self.fail_first -= 1
            return web.json_response({"error": "busy"}, status=503)
        if self.stop_after is not None and len(self.received) >= self.stop_after:
            return web.json_response({"error": "going away"}, status=503)
        self.received.append(rid)
        if self.wedged:
            await self._stopping.wait()
            return web.json_response({"error": "going away"}, status=503)
        if rid in self.refuse:
            status, text = self.refuse[rid]
            if isinstance(text, bytes):   # a body as it comes, in whatever bytes
                return web.Response(body=text, status=status, content_type="text/plain", charset="utf-8")
            return web.json_response({"error": {"message": text}}, status=status)
        if rid in self.in_flight:
            # tokenizer_manager: raise ValueError(f"Duplicate request ID detected: {rid}")
            return web.json_response({"error": {"message": f"Duplicate request ID detected: {rid}"}},
                                     status=400)
        self.in_flight.add(rid)
        try:
            await asyncio.sleep(self.hold.pop(rid, self.delay))
        finally:
            self.in_flight.discard(rid)
        if rid not in self.no_dump:
            write_dump(self.dump_dir, rid, body["input_ids"], self.mutate.get(rid, self.dump_all))
        return web.json_response({"text": "x", "meta_info": {"id": rid}})

    async def health(self, _request):
        return web.Response(text="ok") if self.healthy else web.Response(text="starting", status=503)

    async def start(self):
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=1 << 26)
        app.router.add_post("/generate", self.generate)
        app.router.add_get("/health", self.health)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # pylint: disable=protected-access
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self):
        self._stopping.set()
        await self.runner.cleanup()


async def until(condition, what, timeout=30.0, step=0.02):
    """Poll ``condition()`` until it is true; past ``timeout`` seconds, fail saying ``what`` never
    happened (a wait that never ends fails the test rather than hang the run)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(step)


def write_dataset(path, samples, extra_lines=()):
    """samples: [(id, input_ids, loss_mask)] as JSON Lines; extra_lines appended raw."""
    with open(path, "w", encoding="utf-8") as f:
        for sample_id, ids, mask in samples:
            f.write(json.dumps({"id": sample_id, "input_ids": ids, "loss_mask": mask}) + "\n")
        for line in extra_lines:
            f.write(line + "\n")
    return path


def make_samples(count, start=0, length=lambda n: 3 + n % 7):
    out = []
    for n in range(start, start + count):
        t = length(n)
        ids = [(n * 31 + k * 7) % 1000 for k in range(t)]
        mask = [0] * (t // 2) + [1] * (t - t // 2)
        out.append((f"s{n:05d}", ids, mask))
    return out


def config_for(job_dirs, dataset, url, **over):
    from eagle3_extraction_job import config  # pylint: disable=import-outside-toplevel
    values = dict(job="testjob", dataset=str(dataset), output_dir=job_dirs["out"],
                  dump_dir=job_dirs["dump"], server_url=url, hidden_size=HIDDEN,
                  captured_layers=LAYERS, concurrency=4, ack_timeout=5.0, backoff_initial=0.05,
                  backoff_max=0.2, poll_interval=0.02, status_interval=0.2,
                  output_free_floor_bytes=0, output_free_resume_bytes=0, host="host1",
                  # the test dirs share a disk others fill: only the backpressure test gates
                  shm_high=1.0, shm_low=1.0)
    values.update(over)
    return config.JobConfig(**values)


def slow_drains(monkeypatch, seconds):
    """Every dump's drain takes ``seconds`` longer: a slow output disk."""
    from eagle3_extraction_job import drain  # pylint: disable=import-outside-toplevel
    original = drain.Drainer.drain

    def slow_drain(self, dump_path, sample):
        time.sleep(seconds)
        return original(self, dump_path, sample)
    monkeypatch.setattr(drain.Drainer, "drain", slow_drain)
