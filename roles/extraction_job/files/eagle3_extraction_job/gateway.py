# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capture gateway: SpecForge 0.2.0's server-capture contract in front of one SGLang
capture server (``python -m eagle3_extraction_job gateway --config FILE``).

SpecForge's producer lists the gateways as its ``server_urls``. Each ``POST /generate``
(``capture_request``) is served prompt by prompt, all prompts of a request at once (the
server batches them): the prompt goes to SGLang exactly as the files mode's job sends it
(``sender``: rid ``<job>-<token>``, ``max_new_tokens: 1``; a fresh token per attempt, so a
retry is a new request and a new dump), the capture patch dumps it into the dump dir, and
``capture_store`` checks the dump, puts its objects into Mooncake, sees them there and
deletes the dump. The answer holds one row per prompt, in order: ``meta_info.spec_capture``
is ``{store_id, sample_id, gen, aux_layer_ids, features: {name: {shape, dtype}}}`` or
``{"error": ...}`` for that prompt alone (SpecForge retries it).

``aux_layer_ids`` are the capture's ``layer_ids`` (SGLANG_HS_LAYER_IDS), which are
SpecForge's ids (the draft's ``eagle_aux_hidden_state_layer_ids``, e.g. 1,29,57), not the
layers sglang captures after its +1 (2,30,58): SpecForge's own server patch answers its
``--spec-capture-aux-layer-ids`` the same way, and its contract compares them with the
draft's ids.

At start, the dumps of this job that an earlier gateway process left in the dump dir are
deleted (one log line; ``unanswered_dumps_deleted`` in ``/status``). This is the one place a
dump is deleted without being elsewhere, and why that is safe: such a dump was never answered,
so nothing was promised for it (the producer never got its keys, and leases the prompt again
to a gateway); in the online mode the store, not the disk, is where a sample is safe, and no
other process reads these dumps (each is named after a token only its gateway knew).

``GET /health``: 200 only when the SGLang server's ``/health`` is and the Mooncake client is
set up. ``GET /status`` (also ``/metrics``): counters as JSON. SIGTERM: no new request is
taken (503), the prompts in flight finish (within ``stop_timeout``), then the process ends.
"""
import argparse
import asyncio
import logging
import os
import re
import signal
import sys
import time
import types
import uuid
from concurrent.futures import ThreadPoolExecutor

from eagle3_extraction_job import capture_request, capture_store, config, gateway_config
from eagle3_extraction_job import names, sender
from eagle3_extraction_job.mooncake_writer import MooncakeWriter

log = logging.getLogger("eagle3_extraction_job.gateway")
MOONCAKE_RETRY_S = 5.0
HEALTH_TIMEOUT_S = 10.0
LAST_ERRORS = 5
# the token of each of the gateway's rids (uuid4().hex): its dumps' names, told apart from a files-mode
# job's sample ids
TOKEN_RE = re.compile(r"[0-9a-f]{32}")


class Gateway:  # pylint: disable=too-many-instance-attributes
    def __init__(self, cfg, torch, api_key="", writer=None):
        self.cfg = cfg
        self.torch = torch
        self.api_key = api_key
        self.writer = writer or MooncakeWriter(cfg.mooncake)
        self.pool = ThreadPoolExecutor(cfg.store_threads, thread_name_prefix="gateway-store")
        self.session = None
        self.client = None
        self.stopping = False
        self.in_flight = set()     # the prompts being served (tasks), cancelled by nothing
        self.counters = {"batches": 0, "prompts_served": 0, "prompts_failed": 0,
                         "bytes_put": 0, "dumps_failed": 0, "unanswered_dumps_deleted": 0, "server_retries": 0}
        self.last_errors = []
        self.started_at = time.time()
        torch.set_num_threads(1)   # the threads are the parallelism (as the drain's)

    # -- one prompt ------------------------------------------------------------------

    async def serve_prompt(self, prompt):
        """One row of the answer: ``{"meta_info": {"spec_capture": ...}}``."""
        if prompt.error:
            return self._failed(prompt, prompt.error)
        token = uuid.uuid4().hex
        rid = names.rid_for(self.cfg.job, token)
        sample = types.SimpleNamespace(sample_id=token, input_ids=prompt.input_ids)
        dump_path = os.path.join(self.cfg.dump_dir, names.dump_name_for(self.cfg.job, token))
        failure = await self._send(sample, dump_path)
        if failure:
            return self._failed(prompt, failure, rid)
        if not await self._wait_for(dump_path):
            return self._failed(prompt, f"sglang answered, but no dump {dump_path} appeared in "
                                        f"{self.cfg.ack_timeout:.0f} s", rid)
        loop = asyncio.get_running_loop()
        try:
            result, nbytes = await loop.run_in_executor(
                self.pool, capture_store.store_dump, self.torch, self.writer, self.cfg,
                dump_path, prompt)
        except Exception as exc:  # pylint: disable=broad-except
            self.counters["dumps_failed"] += 1
            return self._failed(prompt, f"{type(exc).__name__}: {exc}", rid)
        self.counters["prompts_served"] += 1
        self.counters["bytes_put"] += nbytes
        return {"text": "", "meta_info": {"id": rid, "prompt_tokens": len(prompt.input_ids),
                                          "spec_capture": result}}

    async def _send(self, sample, dump_path):
        """Send one prompt to SGLang; None once it is on its way to a dump, else why not.

        A server that does not answer (killed, restarting: its unit brings it back) is waited for, the same prompt
        sent again under the same rid until ``server_wait``: the producer then sees a slower answer, not a failure
        that would spend one of the prompt's bounded attempts (SpecForge gives each 5) in a second. A dump of an
        earlier try (the server took it, its answer was lost) is the answer too: the same rid, the same name."""
        deadline = time.monotonic() + self.cfg.server_wait
        delay = 0.5
        while True:
            try:
                await self.client.generate(sample)
                return None
            except sender.AlreadySent:
                return None   # an earlier try of this prompt is on the server: its dump is the answer
            except sender.FatalError as exc:
                log.error("the SGLang server refuses the gateway's API key: %s", exc)
                return f"sglang: {exc}"
            except sender.SampleError as exc:
                return f"sglang: {exc}"
            except sender.RetryableError as exc:
                if os.path.exists(dump_path):
                    return None
                if self.stopping or time.monotonic() + delay > deadline:
                    return f"sglang: {exc} (tried for up to {self.cfg.server_wait:.0f} s)"
                self.counters["server_retries"] += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _wait_for(self, path):
        deadline = time.monotonic() + self.cfg.ack_timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(self.cfg.poll_interval)
        return True

    def _failed(self, prompt, message, rid=""):
        self.counters["prompts_failed"] += 1
        sample_id = prompt.spec.sample_id if prompt.spec else f"prompt {prompt.index}"
        self.last_errors = (self.last_errors + [f"{sample_id}: {message}"])[-LAST_ERRORS:]
        log.warning("%s (rid %s): %s", sample_id, rid or "-", message)
        return {"text": "", "meta_info": {"id": rid, "spec_capture": {"error": message}}}

    def delete_unanswered_dumps(self):
        """Delete the dumps of this job that an earlier gateway process left (killed, or stopped
        past its ``stop_timeout``): unanswered, so the producer leases their prompts again (the
        module's docstring says why this deletion is safe). Returns how many were deleted."""
        deleted = 0
        try:
            entries = list(os.scandir(self.cfg.dump_dir))
        except FileNotFoundError:
            entries = []
        for entry in entries:
            token = names.sample_id_from_dump(self.cfg.job, entry.name)
            if token is None or not TOKEN_RE.fullmatch(token) or not entry.is_file(follow_symlinks=False):
                continue
            try:
                os.unlink(entry.path)
                deleted += 1
            except FileNotFoundError:
                pass
        self.counters["unanswered_dumps_deleted"] = deleted
        if deleted:
            log.warning("deleted %d dumps of job %s left unanswered in %s by an earlier gateway "
                        "(the producer leases their prompts again)", deleted, self.cfg.job,
                        self.cfg.dump_dir)
        return deleted

    # -- HTTP -----------------------------------------------------------------------

    async def handle_generate(self, request):
        web = _web()
        if self.stopping:
            return web.json_response({"error": "the gateway is stopping"}, status=503)
        if not self.writer.ready:
            return web.json_response({"error": "the Mooncake client is not set up yet"},
                                     status=503)
        try:
            prompts = capture_request.parse_body(await request.json(), self.cfg.max_prompts)
        except (ValueError, capture_request.BadRequest) as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=400)
        started = time.monotonic()
        before = dict(self.counters)
        tasks = [asyncio.ensure_future(self.serve_prompt(p)) for p in prompts]
        self.in_flight.update(tasks)
        for task in tasks:
            task.add_done_callback(self.in_flight.discard)
        # shielded: a client that goes away does not stop a prompt half way (its dump is
        # still drained into the store, and SpecForge's discard frees the unanswered keys)
        rows = await asyncio.shield(asyncio.gather(*tasks))
        self.counters["batches"] += 1
        log.info("batch of %d prompts: %d stored, %d failed, %d bytes put, %.2f s", len(prompts),
                 self.counters["prompts_served"] - before["prompts_served"],
                 self.counters["prompts_failed"] - before["prompts_failed"],
                 self.counters["bytes_put"] - before["bytes_put"], time.monotonic() - started)
        return web.json_response(rows)

    async def handle_health(self, _request):
        web = _web()
        problems = []
        if self.stopping:
            problems.append("stopping")
        if not self.writer.ready:
            problems.append("the Mooncake client is not set up")
        if not await self.client.healthy():
            problems.append(f"{self.cfg.server_url}/health is not 200")
        return web.json_response({"healthy": not problems, "problems": problems},
                                 status=503 if problems else 200)

    async def handle_status(self, _request):
        return _web().json_response(self.snapshot())

    def snapshot(self):
        return {"job": self.cfg.job, "server_url": self.cfg.server_url,
                "mooncake_ready": self.writer.ready, "stopping": self.stopping,
                "prompts_in_flight": len(self.in_flight), **self.counters,
                "aux_layer_ids": list(self.cfg.layer_ids), "last_errors": self.last_errors,
                "started_at": self.started_at, "updated_at": time.time()}

    def app(self):
        web = _web()
        application = web.Application(client_max_size=1 << 30)
        application.router.add_post("/generate", self.handle_generate)
        application.router.add_get("/health", self.handle_health)
        application.router.add_get("/status", self.handle_status)
        application.router.add_get("/metrics", self.handle_status)
        return application

    # -- life cycle -----------------------------------------------------------------

    async def connect_store(self):
        """Set the Mooncake client up, again and again until it works (unhealthy meanwhile)."""
        loop = asyncio.get_running_loop()
        while not self.writer.ready and not self.stopping:
            try:
                await loop.run_in_executor(self.pool, self.writer.setup)
                log.info("Mooncake client set up (master %s)", self.cfg.mooncake.master_server_address)
            except Exception as exc:  # pylint: disable=broad-except
                log.error("Mooncake: %s; trying again in %.0f s", exc, MOONCAKE_RETRY_S)
                await asyncio.sleep(MOONCAKE_RETRY_S)

    async def run(self, ready=None):
        """Serve until SIGTERM/SIGINT; returns the exit status."""
        aiohttp = sender._aiohttp()  # pylint: disable=protected-access
        web = _web()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.cfg.max_prompts))
        self.client = sender.Sender(self.session, self.cfg.server_url, self.cfg.job,
                                    api_key=self.api_key, request_timeout=self.cfg.request_timeout)
        self.delete_unanswered_dumps()
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.cfg.listen_host, self.cfg.listen_port)
        await site.start()
        connecting = asyncio.ensure_future(self.connect_store())
        log.info("capture gateway on %s:%d for %s (dumps in %s)", self.cfg.listen_host,
                 self.cfg.listen_port, self.cfg.server_url, self.cfg.dump_dir)
        if ready is not None:
            ready.set()
        await stop.wait()
        return await self.shutdown(runner, connecting)

    async def shutdown(self, runner, connecting):
        self.stopping = True
        log.info("stopping: no new request; %d prompts in flight", len(self.in_flight))
        exit_status = 0
        if self.in_flight:
            _done, pending = await asyncio.wait(set(self.in_flight), timeout=self.cfg.stop_timeout)
            if pending:
                exit_status = 1
                log.error("stopping: %d prompts still in flight after %.0f s; their dumps stay in "
                          "%s, unanswered", len(pending), self.cfg.stop_timeout, self.cfg.dump_dir)
        connecting.cancel()
        await runner.cleanup()
        await self.session.close()
        self.pool.shutdown(wait=exit_status == 0)
        log.info("stopped: %d prompts served, %d failed, %d bytes put",
                 self.counters["prompts_served"], self.counters["prompts_failed"],
                 self.counters["bytes_put"])
        return exit_status


def _web():
    from aiohttp import web  # pylint: disable=import-outside-toplevel
    return web


def main(argv=None):
    parser = argparse.ArgumentParser(prog="eagle3_extraction_job gateway")
    parser.add_argument("--config", required=True, help="the gateway's JSON config")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(message)s")
    try:
        cfg = gateway_config.load(args.config)
        api_key = config.read_api_key(cfg.api_key_file)
    except (OSError, config.ConfigError) as exc:
        log.error("refused to start: %s", exc)
        return 2
    import torch  # pylint: disable=import-outside-toplevel
    return asyncio.run(Gateway(cfg, torch, api_key=api_key).run())


if __name__ == "__main__":
    sys.exit(main())
