# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capture checked against the server itself, after each (re)start, before the shard goes on.

The field's worst failures are captures that look fine and train nothing (a layer off by one,
a buffer never written). SGLang has a second way out for the same tensors: with
``--enable-return-hidden-states`` and the capture on, ``return_hidden_states: true`` answers
the captured aux layers of the prompt (``meta_info.hidden_states[0]``, one row a token; seen
equal to the dumps bit for bit on a real server, shared/recipes/real-sglang). So one short
prompt is sent alone (nothing else in flight: one prompt a batch), its dump is checked as the
drain checks a sample, and its aux layers must equal what the server answered, bit for bit.

When: at the job's first request, and again before the next request whenever the server may
have restarted: the sender met a failure (connection refused, a 5xx, a timeout, an unhealthy
``/health``: ``Sender.troubles`` moved), or the capture's own identity in its
``CAPTURE_STATS.json`` (the pid and start time it writes at start) changed, read at most once
a second, which also sees a restart while the job sent nothing (paused).

A mismatch (or a check prompt whose dump is rejected) raises :class:`CheckFailed`
(``capture_mismatch``); a server that cannot answer hidden states, ``capture_check_unavailable``:
the job stops, writing nothing more. The check's dump is deleted when it passed, kept in the
output's ``rejected/`` dir with the reason when it did not.
"""
import array
import asyncio
import json
import os
import time
import types
import uuid

from eagle3_extraction_job import drain, sender

# the check prompt: the shard's first sample's first tokens (real token ids of this model)
CHECK_TOKENS = 16
# how often the capture's identity is read, at most
IDENTITY_POLL_S = 1.0
STATS_FILE = "CAPTURE_STATS.json"
# in SGLang's refusal when it was started without the flag (tokenizer_manager: "Please set
# `--enable-return-hidden-states` to enable this feature.")
FLAG = "enable-return-hidden-states"
MISMATCH = "capture_mismatch"
UNAVAILABLE = "capture_check_unavailable"


class CheckFailed(RuntimeError):
    """The capture does not equal what the server returns (or cannot be checked): the job stops.

    ``state``: what status.json says; ``details``: the numbers (max_abs_diff, layer...)."""

    def __init__(self, state, message, details=None):
        super().__init__(message)
        self.state = state
        self.details = details or {}


def capture_identity(dump_dir):
    """``(pid, started)`` of the capture writing into ``dump_dir`` (its CAPTURE_STATS.json), or None."""
    try:
        with open(os.path.join(dump_dir, STATS_FILE), encoding="utf-8") as f:
            stats = json.load(f)
        return (stats["pid"], stats["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_rid(job):
    """A rid the capture dumps and the drain never takes for a sample's (the id after the
    first ``-`` starts with a dot: no sample id does)."""
    return f"{job}-.capture-check.{uuid.uuid4().hex[:8]}"


def rows_shape(rows):
    """``[rows, width]`` of ``meta_info.hidden_states[0]`` (SGLang's ``tolist()`` of a [T, W] tensor), or
    ``None`` when it is not a list of equal lists."""
    if not isinstance(rows, list) or not rows or not all(isinstance(row, list) for row in rows):
        return None
    widths = {len(row) for row in rows}
    return [len(rows), widths.pop()] if len(widths) == 1 else None


def compare(torch, dump, returned):
    """``None`` when ``returned`` (``meta_info.hidden_states[0]``) equals the dump's aux layers
    bit for bit; else ``(message, details)`` naming the layer and the max abs difference."""
    aux = dump["aux_hidden_state"][0]
    tokens, width = aux.shape
    hidden = dump["hidden_state"].shape[-1]
    layers = width // hidden
    try:
        got = torch.tensor(returned, dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError) as exc:
        return (f"the server's hidden states are not rows of numbers ({type(exc).__name__}: "
                f"{str(exc)[:100]})", {})
    if got.dim() == 1 and tokens == 1:
        got = got.unsqueeze(0)
    if tuple(got.shape) != (tokens, width):
        message = (f"the server returned hidden states of shape {list(got.shape)}, the dump's aux layers "
                   f"are [{tokens}, {width}] ({layers} layers of {hidden}): the capture is not on the "
                   "layers the server computes")
        return message, {"returned_shape": list(got.shape), "dump_shape": [tokens, width]}
    want = aux.float()
    # float32 from bf16 is exact: equal bits here are equal bits in bf16
    differ = got.view(torch.int32) != want.view(torch.int32)
    if not bool(differ.any()):
        return None
    # -1 where the bits are equal: a layer whose only difference is +0 against -0 still shows
    diff = torch.where(differ, (got - want).abs().nan_to_num(nan=float("inf")), -1.0)
    per_layer = diff.view(tokens, layers, hidden).amax(dim=(0, 2))
    worst = int(per_layer.argmax())
    captured = dump.get("captured_layers")
    layer_id = captured[worst] if isinstance(captured, list) and len(captured) == layers else None
    details = {"max_abs_diff": float(per_layer[worst]), "layer": worst + 1, "layers": layers,
               "captured_layer": layer_id, "values_differing": int(differ.sum()),
               "values": tokens * width}
    named = f" (captured layer {layer_id})" if layer_id is not None else ""
    return (f"the dump differs from what the server returns through return_hidden_states: "
            f"{details['values_differing']} of {details['values']} values, max abs diff "
            f"{details['max_abs_diff']:g} at layer {worst + 1} of {layers}{named}", details)


class ServerCheck:  # pylint: disable=too-many-instance-attributes
    """When the capture must be checked, and the check (see the module's doc)."""

    def __init__(self, cfg, torch, pool, prompt_ids):
        self.cfg = cfg
        self.torch = torch
        self.pool = pool
        self.prompt_ids = list(prompt_ids[:CHECK_TOKENS])
        self.enabled = bool(cfg.capture_check) and bool(self.prompt_ids)
        self.due = "the job's start" if self.enabled else ""
        self.identity = None      # the capture's (pid, started) when the last check passed
        self.troubles = 0         # the sender's count of failures when the last check passed
        self.failure = None
        self.report = {"enabled": self.enabled, "checks": 0}   # status.json's capture_check
        self._polled = 0.0
        self._running = None
        # (what the check waits on, since when): the stall watchdog's words (waits)
        self._waiting = None

    def waits(self, now):
        """What the check waits on at ``now`` (monotonic), in words, or ``""`` (the stall watchdog's thread)."""
        waiting = self._waiting
        return f"{waiting[0]} for {now - waiting[1]:.0f} s" if waiting else ""

    def _why_due(self, client):
        if self.due or not self.enabled:
            return self.due
        if client.troubles != self.troubles:
            return "the server failed a request or /health since the last check"
        now = time.monotonic()
        if now - self._polled >= IDENTITY_POLL_S:
            self._polled = now
            seen = capture_identity(self.cfg.dump_dir)
            if seen is not None and self.identity is not None and seen != self.identity:
                return f"the capture restarted (pid {seen[0]}, started {seen[1]})"
        return ""

    async def before_request(self, client):
        """Returns when a request may go: at once, or after the check ran (and passed); raises
        :class:`CheckFailed` (stop the job) or ``sender.RetryableError`` (the check could not run)."""
        while True:
            if self.failure is not None:
                raise self.failure
            if self._running is not None:
                await asyncio.shield(self._running)
                continue
            self.due = self._why_due(client)
            if not self.due:
                return
            self._running = asyncio.get_running_loop().create_future()
            try:
                await self._check_with_retries(client)
                self.due = ""
            except CheckFailed as exc:
                self.failure = exc
                raise
            finally:
                running, self._running = self._running, None
                running.set_result(None)

    async def _check_with_retries(self, client):
        cfg = self.cfg
        problem = ""
        for attempt in range(1, cfg.max_attempts + 1):
            await client.idle()   # one prompt a batch: nothing else at the server
            try:
                await self._check_once(client)
                return
            except sender.RetryableError as exc:
                problem = str(exc)
            await asyncio.sleep(sender.backoff(attempt, cfg.backoff_initial, cfg.backoff_max))
        raise sender.RetryableError(f"the capture check could not run ({cfg.max_attempts} tries): {problem}")

    async def _check_once(self, client):
        cfg = self.cfg
        rid = check_rid(cfg.job)
        self._waiting = ("the capture check's prompt sent and unanswered", time.monotonic())
        try:
            answer = await client.generate_returning_hidden_states(rid, self.prompt_ids)
        except sender.SampleError as exc:
            if FLAG in str(exc):
                raise self._unavailable(f"the server refused return_hidden_states ({exc})") from exc
            raise CheckFailed(MISMATCH, f"the server refused the capture check's prompt: {exc}") from exc
        finally:
            self._waiting = None
        returned = ((answer or {}).get("meta_info") or {}).get("hidden_states") if isinstance(
            answer, dict) else None
        if not isinstance(returned, list) or not returned:
            raise self._unavailable("the server answered without hidden states")
        # the aux layers' shape, before waiting for a dump: a server whose capture is off returns its final
        # hidden state (one layer wide) and dumps nothing, which no wait would change
        shape = rows_shape(returned[0])
        expected = [len(self.prompt_ids), cfg.captured_layers * cfg.hidden_size]
        if shape != expected:
            message = (f"the server returned hidden states of shape {shape}, expected {expected} "
                       f"({cfg.captured_layers} captured layers of {cfg.hidden_size}): its capture is off "
                       "(it returns its final hidden state) or on other layers")
            self.report.update(result=MISMATCH, at=time.time(), reason=self.due, returned_shape=shape)
            raise CheckFailed(MISMATCH, message, {"returned_shape": shape})
        path = os.path.join(cfg.dump_dir, rid + ".pt")
        deadline = time.monotonic() + cfg.ack_timeout
        self._waiting = ("the capture check's prompt answered, its dump not appeared", time.monotonic())
        try:
            while not os.path.exists(path):
                if time.monotonic() > deadline:
                    raise sender.RetryableError(f"the capture check's prompt was answered, but no dump "
                                                f"{path} appeared in {cfg.ack_timeout:.0f} s")
                await asyncio.sleep(cfg.poll_interval)
        finally:
            self._waiting = None
        loop = asyncio.get_running_loop()
        outcome = await loop.run_in_executor(self.pool, self._compare_dump, path, returned[0])
        self.report["checks"] += 1
        if outcome is not None:
            message, details = outcome
            await self._settle(path, f"{MISMATCH}: {message}")
            self.report.update(result=MISMATCH, at=time.time(), reason=self.due, **details)
            raise CheckFailed(MISMATCH, message, details)
        await self._settle(path, None)
        self.identity = capture_identity(cfg.dump_dir)
        self.troubles = client.troubles
        self.report = {"enabled": True, "checks": self.report["checks"], "result": "passed",
                       "at": time.time(), "reason": self.due, "tokens": len(self.prompt_ids)}

    def _unavailable(self, why):
        self.report.update(result=UNAVAILABLE, at=time.time(), reason=self.due)
        return CheckFailed(UNAVAILABLE, (
            f"{why}: the capture cannot be checked against the server. Start the server with "
            f"--{FLAG} (the sglang_server role adds it while extraction_job_capture_check is on: "
            "roll the server out again), or turn the check off (extraction_job_capture_check: false)"))

    def _compare_dump(self, path, returned):
        """In a drain thread: the dump checked as a sample's, then against the returned rows."""
        sample = types.SimpleNamespace(input_ids=array.array("q", self.prompt_ids))
        try:
            dump = drain.load_dump(self.torch, path)
            drain.check_dump(self.torch, dump, sample, self.cfg.hidden_size, self.cfg.captured_layers)
        except drain.DumpRejected as exc:
            return f"the capture check's dump is rejected: {exc}", {}
        return compare(self.torch, dump, returned)

    async def _settle(self, path, reason):
        """The check's dump: deleted after a pass, else kept aside with the reason."""
        loop = asyncio.get_running_loop()
        if reason is None:
            os.unlink(path)
            return
        await loop.run_in_executor(self.pool, drain.move_aside, path,
                                   os.path.join(self.cfg.output_dir, "rejected"), reason)
