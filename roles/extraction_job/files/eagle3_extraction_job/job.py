# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of the job: read, resume, refuse or send, drain, report.

Order at start: read the dataset and keep this shard; hold the output dir's lock
(``job.lock``: a repair moves files only while it holds it); open the manifest and
check it belongs to this job, shard and dataset; undo interrupted writes; drain
every dump already there (the dump dir and the dirs its ``dump_dir_aside_glob`` matches); the rest
of the shard is exactly the samples not ``done``; refuse, with the numbers, if
the output disk cannot hold them; then send with bounded concurrency while the
drain turns each dump into a durable file. A request counts only when its dump
was drained.
"""
import asyncio
import concurrent.futures
import contextlib
import glob
import logging
import os
import sqlite3
import threading
import time

from eagle3_extraction_job import (capture_check, chat, dataset, drain, manifest, metrics, names, sender, space, stall,
                                   status)

log = logging.getLogger("eagle3_extraction_job")

EXIT_COMPLETE = 0
EXIT_INCOMPLETE = 1
EXIT_REFUSED = 2
# no sample settled for the stall window: restarted by systemd, or, past the bound, stopped (stall.py)
EXIT_STALL_RESTART = stall.EXIT_STALL_RESTART
EXIT_STALLED = stall.EXIT_STALLED

# a drain that met a full or failing output disk tries that dump again after this long
DISK_RETRY_S = 5.0

# how long a stalled job waits for its status.json to be written before it goes on ending
STALLED_STATUS_WRITE_S = 5.0

# the most samples the sender keeps between their request and their durable file
SEND_WINDOW_MAX = 16384


class Refused(RuntimeError):
    """The job will not start (space, a foreign output dir, the API key...)."""


def tokenizer_refusal(cfg, exc, needed):
    """Why the job will not start when the conversations' tokenizer cannot be loaded; needed: the
    lines that need it ("3 conversation lines of this shard")."""
    where = (f"tokenizer_path={cfg.tokenizer_path!r}" if cfg.tokenizer_path
             else f"model_path={cfg.model_path!r} (tokenizer_path is empty)")
    return (f"the tokenizer cannot be loaded from {where}: {type(exc).__name__}: {str(exc)[:200]}; "
            f"{needed} need it. Give extraction_job_tokenizer_path "
            "a tokenizer dir on the host (or the model dir), with transformers in the job's venv")


class DrainFailed(RuntimeError):
    """The drain met what it cannot go on through: every sample would wait on it.

    ``permanent``: a restart meets it again (the dumps come from another sglang than the
    output's, say), so the job exits with EXIT_REFUSED, which systemd does not restart."""

    def __init__(self, message, permanent=False):
        super().__init__(message)
        self.permanent = permanent


def _disk_trouble(exc):
    """A failure of the output disk that passes (full, read-only for a while): try again."""
    if isinstance(exc, OSError):
        return True
    # sqlite's "database or disk is full" and "disk I/O error" are not OSErrors
    return isinstance(exc, sqlite3.OperationalError) and any(
        word in str(exc) for word in ("full", "disk I/O"))


class Job:  # pylint: disable=too-many-instance-attributes
    def __init__(self, cfg, torch, api_key="", tokenizer_factory=None, usage_fn=space.usage,
                 filesystem_type_fn=space.filesystem_type, watchdog_factory=stall.Watchdog):
        self.cfg = cfg
        self.torch = torch
        self.api_key = api_key
        self.tokenizer_factory = tokenizer_factory or chat.ConversationTokenizer.from_pretrained
        self.filesystem_type_fn = filesystem_type_fn
        self.usage_fn = usage_fn
        self.samples = {}
        self.scan = None
        self.bad_lines = []       # the dataset's bad lines this shard counts and names
        self.manifest = None
        self.drainer = None
        self.gate = None
        self.server_check = None
        self.rate = status.Rate()
        self.acks = {}
        self.draining = set()
        self.errors = []          # (time, sample id, message), newest last
        self.refused = set()      # samples the server refused (4xx) in this run
        # samples whose last failure in this run is a rejected dump; and those whose last failure before this
        # run was one (the manifest's): rejected in two runs running, a dump is what the capture gives them
        self.rejected = set()
        self.rejected_before = set()
        self.samples_failed = 0   # the manifest's failures, as of the last status write
        self.error_count = 0
        self.answered = 0         # requests of this run the server answered (2xx): the start is past
        self.foreign_dumps = 0
        self.state = "starting"
        self.started_at = time.time()
        # the last sample this process made durable (the metrics' no-progress alert reads it); the start until then
        self.last_durable_at = self.started_at
        self.totals = {"samples": 0, "tokens": 0, "bytes": 0}
        self.shard_tokens = 0
        self.pool = None
        self._status_task = None
        self._status_lock = threading.Lock()
        self._status_written_at = 0.0
        self._lock_fd = None
        # the stall watchdog (stall.py) and what it reads: requests at the server and drains
        # under way, each {sample id: monotonic time it began}
        self.watchdog_factory = watchdog_factory
        self.watchdog = None
        self.in_flight = {}
        self.drain_started = {}
        self.stall_waiting_on = ""   # what a stalled shard waits on (stall.waiting_on)
        self.stall_quiet_s = None
        self.stall_code = None
        self._run_task = None
        self._loop = None

    # -- reporting --------------------------------------------------------------

    def named(self, sample_id):
        """A sample as messages name it: its id and its line in the dataset, where it is fixed."""
        sample = self.samples.get(sample_id) if sample_id else None
        if sample is None:
            return sample_id or "job"
        return f"{sample_id} (line {sample.line})"

    def error(self, sample_id, message):
        self.error_count += 1
        self.errors = (self.errors + [(time.time(), self.named(sample_id), message)])[-20:]
        log.error("%s: %s", self.named(sample_id), message)

    def record_failure(self, sample_id, reason, said=None):
        """A sample's last try failed: said (status, log; ``said``, else the reason) and its
        reason recorded in the manifest, with the sample's line in the dataset."""
        if drain.REJECTION_RE.fullmatch(reason):
            self.rejected.add(sample_id)
        else:
            self.rejected.discard(sample_id)
        self.error(sample_id, said or reason)
        self.manifest.record_failure(sample_id, reason, line=self.samples[sample_id].line)
        self._settled()

    # -- the stall watchdog's side (stall.py) -------------------------------------

    def _settled(self):
        """A sample is done or its failure recorded: progress, for the stall watchdog."""
        if self.watchdog is not None:
            self.watchdog.progress()

    def _excused(self, excused=True):
        """A wait the stall window does not count (see stall.Watchdog.excused)."""
        if self.watchdog is None or not excused:
            return contextlib.nullcontext()
        return self.watchdog.excused()

    def cannot_be_helped(self, left, again):
        """Why the samples left stop the job: refused by the server, or their dumps rejected twice."""
        refused, rejected = len(left & self.refused), len(left & again)
        said = [f"{refused} samples refused by the server"] if refused else []
        said += [f"{rejected} samples whose dumps were rejected in this run and the one before (kept in "
                 f"{self.drainer.rejected_dir})"] if rejected else []
        return (" and ".join(said) + " (their reasons are above and in the manifest's failures): fix them "
                "or the server, or accept them as not extracted (extraction_job_accept_failed, "
                "README 'Recovery'), then run extract.yml again")

    def samples_left(self):
        return self.totals["samples"] < len(self.samples)

    def stall_waits(self):
        """What the shard waits on, in words (read on the watchdog's thread: copies only)."""
        in_flight, draining = self.in_flight.copy(), self.drain_started.copy()
        answered = len(set(self.acks.copy()) - set(in_flight) - set(draining))
        now = time.monotonic()
        check = self.server_check.waits(now) if self.server_check is not None else ""
        return stall.waiting_on(in_flight, answered, draining,
                                len(self.samples) - self.totals["samples"], now, check=check)

    def stalled(self, reason, code):
        """The watchdog found a stall (its thread): say so in status.json and the log, and ask
        the run to end with ``code``."""
        self.stall_code = code
        self.state = "stalled"
        self.error(None, f"stalled: {reason}")

        def write():
            try:
                # no new reading of the manifest or the disks (either may be what hangs): the
                # counters as they are
                self._write_status_file(self.snapshot())
            except Exception:  # pylint: disable=broad-except
                log.exception("cannot write the stalled status")
        # on a thread of its own: a status write stuck on the disk (holding the status lock)
        # must not keep the watchdog from ending the process
        writer = threading.Thread(target=write, name="stalled-status", daemon=True)
        writer.start()
        writer.join(STALLED_STATUS_WRITE_S)
        if self._loop is not None and self._run_task is not None:
            self._loop.call_soon_threadsafe(self._run_task.cancel)

    def _output_disk_full(self):
        gate = self.gate
        return bool(gate and gate.closed_reason and gate.out.free < gate.out_resume)

    def snapshot(self):
        gate = self.gate
        done, total = self.totals["samples"], len(self.samples)
        left_tokens = max(0, self.shard_tokens - self.totals["tokens"])
        rate = self.rate.per_second()
        return {
            "format": status.STATUS_FORMAT,
            "job": self.cfg.job,
            "host": self.cfg.host,
            "pid": os.getpid(),
            # the gate closed (a full output disk...) pauses the job even where no request is waiting at it:
            # every sample may be sent already, its dump waiting for the disk; a stalled job is stalled
            "state": "stalled" if self.stall_code is not None else (
                "paused" if self.state == "running" and gate and gate.closed_reason else self.state),
            "paused": gate.closed_reason if gate else "",
            "shard_index": self.cfg.shard_index,
            "shard_count": self.cfg.shard_count,
            "samples_total": total,
            "samples_done": done,
            "tokens_total": self.shard_tokens,
            "tokens_done": self.totals["tokens"],
            "bytes_done": self.totals["bytes"],
            "tokens_per_s": round(rate, 1),
            "eta_s": round(left_tokens / rate) if rate > 0 else (0 if left_tokens == 0 else None),
            "shm_used_bytes": gate.shm.used if gate else 0,
            "shm_total_bytes": gate.shm.total if gate else 0,
            "output_free_bytes": gate.out.free if gate else 0,
            "samples_failed": self.samples_failed,
            "errors": self.error_count,
            "answered": self.answered,
            "bad_lines": len(self.bad_lines),
            "foreign_dumps": self.foreign_dumps,
            "capture_check": self.server_check.report if self.server_check else {},
            "last_errors": [f"{who}: {msg}" for _at, who, msg in self.errors[-5:]],
            # the stall watchdog: what a stalled shard waits on and for how long, its restarts
            # since the last settled sample (bounded by stall_restarts_max) and in all; final:
            # it stopped (the whole reason is in last_errors and the log)
            "stalled": self.stall_waiting_on,
            "stalled_for_s": self.stall_quiet_s,
            "stall_final": self.stall_code == EXIT_STALLED,
            "stall_restarts": self.watchdog.counts["restarts"] if self.watchdog else 0,
            "stall_restarts_total": self.watchdog.counts["restarts_total"] if self.watchdog else 0,
            "stall_restarts_max": self.cfg.stall_restarts_max,
            "started_at": self.started_at,
            "updated_at": time.time(),
        }

    def write_status(self):
        """status.json now, from the calling thread (the end of a run)."""
        snap = self._status_snapshot()
        if snap is not None:
            self._write_status_file(snap)

    def _status_snapshot(self):
        try:
            if self.manifest:
                self.samples_failed = self.manifest.failed_count()
            if self.gate:
                self.gate.update()
            return self.snapshot()
        except OSError as exc:
            log.warning("cannot write %s: %s", self.cfg.effective_status_file, exc)
            return None

    def _write_status_file(self, snap):
        """Write one snapshot (any thread); one written after a newer one is dropped."""
        with self._status_lock:
            if snap["updated_at"] < self._status_written_at:
                return
            try:
                status.write_status(self.cfg.effective_status_file, snap, mode=status.STATUS_MODE)
                self._status_written_at = snap["updated_at"]
            except OSError as exc:
                log.warning("cannot write %s: %s", self.cfg.effective_status_file, exc)
            if self.cfg.metrics_dir:
                self._write_metrics(snap)

    def _write_metrics(self, snap):
        """The Prometheus textfile (metrics.py) of the same snapshot as status.json; never raises."""
        extra = {
            "shm_high_watermark_bytes": int(self.cfg.shm_high * snap["shm_total_bytes"]),
            "output_floor_bytes": self.cfg.output_free_floor_bytes,
            "last_durable_at": self.last_durable_at,
        }
        metrics.write(self.cfg.metrics_dir, snap, extra, time.time())

    def write_card(self, complete):
        provenance = self.manifest.meta() if self.manifest else {}
        status.write_json_atomic(self.cfg.card_path, status.card(
            self.cfg, self.scan, self.totals, provenance, len(self.samples), self.shard_tokens,
            complete, self.bad_lines))

    async def _status_loop(self):
        loop = asyncio.get_running_loop()
        while True:
            snap = self._status_snapshot()
            if snap is not None:
                # the file's fsync waits on the output disk: up to tens of ms while the
                # drain's files are written back, time in which the event loop would send
                # no request and read no answer; so it is written on another thread
                await loop.run_in_executor(None, self._write_status_file, snap)
            await asyncio.sleep(self.cfg.status_interval)

    # -- preparing --------------------------------------------------------------

    def load_dataset(self):
        cfg = self.cfg
        self.scan = dataset.scan(cfg.dataset, cfg.shard_index, cfg.shard_count, cfg.dataset_format)
        if self.scan.dataset_samples == 0 and self.scan.bad_lines:
            # a run of nothing is no success: every shard would end "complete", 0 of 0
            raise Refused(f"every line of the dataset {cfg.dataset} is bad ({len(self.scan.bad_lines)} "
                          f"lines), nothing can be extracted; the first: {self.scan.bad_lines[0]}")
        pending = [s for s in self.scan.samples if s.conversations is not None]
        tok = None
        if pending:
            try:
                tok = self.tokenizer_factory(
                    cfg.tokenizer_path or cfg.model_path,
                    assistant_header=cfg.chat_assistant_header, end_of_turn=cfg.chat_end_of_turn,
                    system_prompt=cfg.chat_system_prompt, max_length=cfg.max_length,
                    ignore_tokens=cfg.chat_ignore_tokens)
            except Exception as exc:  # pylint: disable=broad-except
                # no tokenizer (not in the venv, not in the model dir, a hub name on a host that cannot
                # reach the hub): not a fault of any line, and every conversation line of every shard
                # would be "bad" while the run ends complete; the configuration is what to fix
                raise Refused(tokenizer_refusal(cfg, exc, f"{len(pending)} conversation lines of this shard")) from exc
        if tok is not None:
            for sample in pending:
                try:
                    sample.input_ids, sample.loss_mask = tok.encode(sample.conversations)
                    sample.conversations = None
                except (ValueError, TypeError) as exc:
                    self.scan.bad_lines.append(dataset.BadLine(sample.line, sample.sample_id,
                                                               f"chat template: {exc}"))
        tokenized = [s for s in self.scan.samples if s.conversations is None]
        vocab = self._vocab_size()
        beyond = set()
        for sample in tokenized if vocab else ():
            if sample.input_ids and max(sample.input_ids) >= vocab:
                position = next(n for n, t in enumerate(sample.input_ids) if t >= vocab)
                self.scan.bad_lines.append(dataset.BadLine(sample.line, sample.sample_id, (
                    f"token id {sample.input_ids[position]} at position {position} is not below "
                    f"the model's vocab_size {vocab}")))
                beyond.add(sample.sample_id)
        self.samples = {s.sample_id: s for s in tokenized if s.sample_id not in beyond}
        self.shard_tokens = sum(s.tokens for s in self.samples.values())
        # each bad line is the business of one shard (every shard reads them all): counted
        # in its status.json and card, and named in its log, once for the whole job
        self.bad_lines = [bad for bad in self.scan.bad_lines
                          if dataset.bad_line_shard(bad, cfg.shard_count) == cfg.shard_index]
        for bad in self.bad_lines:
            log.error("dataset %s: %s", cfg.dataset, bad)
        log.info("dataset %s: %d good lines; shard %d of %d: %d samples, %d tokens, %d bad lines",
                 cfg.dataset, self.scan.dataset_samples, cfg.shard_index, cfg.shard_count,
                 len(self.samples), self.shard_tokens, len(self.bad_lines))

    def accepted_failures(self):
        """The samples of this shard the user accepts as not extracted (``accept_failed``) that failed: not
        sent again; the shard is complete without them. An accepted sample that has not failed is sent (verify
        names it)."""
        accepted = set(self.cfg.accept_failed) & self.manifest.failed_ids() & self.samples.keys()
        if accepted:
            log.warning("%d failed samples accepted as not extracted (extraction_job_accept_failed): %s",
                        len(accepted), ", ".join(self.named(s) for s in sorted(accepted)))
        return accepted

    def _vocab_size(self):
        """The model's vocab_size, which every token id must be below (the server would fail
        the request, and SpecForge's trainer the batch); None when the model dir has none."""
        if not self.cfg.model_path:
            return None
        try:
            return space.model_config_int(self.cfg.model_path, "vocab_size")
        except (OSError, ValueError) as exc:
            log.warning("no vocab_size from %s/config.json (%s): token ids are not checked",
                        self.cfg.model_path, exc)
            return None

    def open_output(self):
        cfg = self.cfg
        try:   # before the output dir is made: nothing is written to memory as if it were durable
            space.check_durable(cfg.output_dir, self.filesystem_type_fn)
        except space.NotDurable as exc:
            raise Refused(str(exc)) from exc
        if not cfg.hidden_size:
            if not cfg.model_path:
                raise Refused("hidden_size is 0 and model_path is empty: one is needed to "
                              "work out the bytes a token takes")
            cfg.hidden_size = space.hidden_size_from_model(cfg.model_path)
        manifest.makedirs_durable(cfg.output_dir)
        self._lock_output_dir()
        self.manifest = manifest.open_manifest(cfg.output_dir)
        try:
            self.manifest.pin(job=cfg.job, shard_index=cfg.shard_index,
                              shard_count=cfg.shard_count, dataset_sha256=self.scan.sha256)
        except manifest.ManifestMismatch as exc:
            raise Refused(str(exc)) from exc
        undone = drain.recover(self.manifest, cfg.output_dir)
        if undone:
            log.warning("removed %d interrupted writes; their samples are drained again", undone)
        missing = drain.redo_missing(self.manifest, cfg.output_dir)
        if missing:
            log.warning("%d finished samples have no file (%s%s): they are extracted again",
                        len(missing), ", ".join(missing[:5]), ", ..." if len(missing) > 5 else "")
        self.drainer = drain.Drainer(self.torch, self.manifest, cfg.output_dir,
                                     hidden_size=cfg.hidden_size,
                                     captured_layers=cfg.captured_layers)
        self.totals = self.manifest.totals()
        self.gate = space.Gate(cfg.dump_dir, cfg.output_dir, cfg.shm_high, cfg.shm_low,
                               cfg.output_free_floor_bytes, cfg.output_free_resume_bytes,
                               usage_fn=self.usage_fn)

    def _lock_output_dir(self):
        """The output dir is this process's until it ends: a repair moving a damaged file
        aside (playbooks/repair.yml) waits for the job, and the job waits for the repair,
        whose moves the start below then finds (a ``done`` row without its file is redone)."""
        try:
            self._lock_fd = manifest.lock_output_dir(self.cfg.output_dir, wait=False)
        except BlockingIOError:
            log.warning("waiting for %s/%s: another process holds it (a repair, or a second job "
                        "on this output dir)", self.cfg.output_dir, manifest.LOCK_NAME)
            self._lock_fd = manifest.lock_output_dir(self.cfg.output_dir, wait=True)

    # -- draining ---------------------------------------------------------------

    def dump_dirs(self):
        """The dump dir, then the dirs the server role moved undrained dumps aside to."""
        aside = self.cfg.dump_dir_aside_glob
        return [self.cfg.dump_dir] + (sorted(glob.glob(aside)) if aside else [])

    def find_dumps(self):
        found = []
        foreign = 0
        for directory in self.dump_dirs():
            try:
                entries = os.scandir(directory)
            except FileNotFoundError:
                continue
            with entries:
                for entry in entries:
                    sample_id = names.sample_id_from_dump(self.cfg.job, entry.name)
                    if sample_id is None:
                        continue
                    if sample_id not in self.samples:
                        foreign += 1   # another shard's (a handed-over host's): not ours
                        continue
                    found.append((entry.path, sample_id))
        self.foreign_dumps = foreign
        return found

    async def drain_one(self, path, sample_id):
        loop = asyncio.get_running_loop()
        sample = self.samples[sample_id]
        self.drain_started[sample_id] = time.monotonic()
        try:
            outcome, info = await loop.run_in_executor(self.pool, self.drainer.drain, path,
                                                       sample)
        except drain.DumpRejected as exc:
            reason = drain.rejection(path, exc)
            self.record_failure(sample_id, reason)
            try:
                kept = await loop.run_in_executor(self.pool, self.drainer.reject, path, reason)
                log.error("%s: kept for inspection at %s", sample_id, kept)
            except OSError as move_exc:
                self.error(sample_id, f"cannot move the rejected dump aside: {move_exc}")
            self._ack(sample_id, "rejected: " + str(exc))
            return
        except manifest.ManifestMismatch as exc:
            # the dump's provenance (layers, sglang version, model) is not the output's
            raise DrainFailed(f"drain of {path}: {exc}", permanent=True) from exc
        except Exception as exc:  # pylint: disable=broad-except
            if not _disk_trouble(exc):
                log.exception("drain of %s failed", path)
                raise DrainFailed(f"drain of {path} failed: {type(exc).__name__}: {exc}") from exc
            # the output disk (full, read-only...): the dump stays and is tried again
            self.error(sample_id, f"drain of {path} failed, will retry: {exc}")
            await asyncio.sleep(DISK_RETRY_S)
            return
        finally:
            self.draining.discard(path)
            self.drain_started.pop(sample_id, None)
        if outcome == "done":
            self.totals = {"samples": self.totals["samples"] + 1,
                           "tokens": self.totals["tokens"] + sample.tokens,
                           "bytes": self.totals["bytes"] + info["bytes"]}
            self.rate.add(sample.tokens)
            self.last_durable_at = time.time()
        self._ack(sample_id, "done")

    def _ack(self, sample_id, result):
        self._settled()
        fut = self.acks.get(sample_id)
        if fut is not None and not fut.done():
            fut.set_result(result)

    async def drain_pass(self):
        tasks = []
        for path, sample_id in self.find_dumps():
            if path in self.draining:
                continue
            self.draining.add(path)
            tasks.append(asyncio.create_task(self.drain_one(path, sample_id)))
        # every drain of the pass ends before a failure is raised: none is left running
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
        return len(tasks)

    def _start_drains(self, running):
        """A drain task for each dump not being drained yet, added to ``running``."""
        for path, sample_id in self.find_dumps():
            if path not in self.draining:
                self.draining.add(path)
                running.add(asyncio.create_task(self.drain_one(path, sample_id)))

    async def _drain_loop(self, stop):
        """Drains every dump as it appears until ``stop`` is set, then waits for the
        drains under way; a failed drain stops new ones, and is raised once every drain
        under way has ended.

        The dump dir is read again whenever a drain ends (or every ``poll_interval``): a
        drain thread that is done takes the next dump at once, not after the slowest
        drain of a pass (the passes of the first version left threads idle at each pass's
        end, and a dump that appeared during a pass waited for it to end).
        Never cancelled: a cancelled drain would leave its thread draining a dump that
        the final pass then finds and drains again."""
        running = set()
        failure = None
        stopping = asyncio.create_task(stop.wait())
        try:
            while True:
                if failure is None and not stop.is_set():
                    self._start_drains(running)
                elif not running:
                    break
                # not empty: with ``stopping`` done and nothing running the loop has ended
                wait_for = running | ({stopping} if not stopping.done() else set())
                done, _pending = await asyncio.wait(wait_for, timeout=self.cfg.poll_interval,
                                                    return_when=asyncio.FIRST_COMPLETED)
                for task in done - {stopping}:
                    running.discard(task)
                    if task.exception() is not None and failure is None:
                        failure = task.exception()
        finally:
            stopping.cancel()
            await asyncio.gather(stopping, return_exceptions=True)
        if failure is not None:
            raise failure

    # -- sending ----------------------------------------------------------------

    async def _wait_gate(self):
        while not self.gate.update():
            if self.state != "paused":
                log.warning("paused: %s", self.gate.closed_reason)
            self.state = "paused"
            # the output disk under its floor waits for a person, not for a restart; /dev/shm
            # over its watermark waits for the drain, which the window watches
            with self._excused(self._output_disk_full()):
                await asyncio.sleep(1.0)
        if self.state == "paused":
            log.info("resumed")
        self.state = "running"

    async def _wait_healthy(self, client):
        deadline = time.monotonic() + self.cfg.health_timeout
        while not await client.healthy():
            if time.monotonic() > deadline:
                raise sender.RetryableError(
                    f"{self.cfg.server_url}/health not 200 for {self.cfg.health_timeout:.0f} s")
            # a server that is not healthy is not a stall of this job (its own unit restarts it)
            with self._excused():
                await asyncio.sleep(2.0)

    async def send_one(self, client, sem, sample):
        cfg = self.cfg
        sid = sample.sample_id
        loop = asyncio.get_running_loop()
        for attempt in range(1, cfg.max_attempts + 1):
            # The slot bounds requests at the server; it is given back as soon as the
            # server answers, so the drain's disk time never idles the server (/dev/shm
            # is bounded by the watermark gate instead, read in the slot, just before the
            # request goes: every sample of the send window may be waiting for a slot, and
            # none goes on a reading of the gate made before the slots ahead of it filled
            # /dev/shm).
            async with sem:
                # the capture checked against the server first, after each (re)start (and again if
                # the server restarted while the gate held the request: a check is cheap when not due)
                await self.server_check.before_request(client)
                await self._wait_gate()
                if self.manifest.is_done(sid) is not None:
                    return True
                await self.server_check.before_request(client)
                fut = self.acks[sid] = loop.create_future()
                refused = None
                self.in_flight[sid] = time.monotonic()
                try:
                    await client.generate(sample)
                    self.answered += 1
                except sender.AlreadySent:
                    pass   # an earlier try is still at the server: its dump answers this one
                except sender.RetryableError as exc:
                    problem = f"try {attempt}: {exc}"
                    fut = None
                    self.acks.pop(sid, None)
                except sender.SampleError as exc:
                    refused, fut = exc, None
                    self.acks.pop(sid, None)
                except BaseException:
                    self.acks.pop(sid, None)
                    raise
                finally:
                    self.in_flight.pop(sid, None)
            if refused is not None:
                # sending it again will not help (too long for the context, ...): the
                # sample is recorded as failed with the server's reason; the others go on
                reason = f"refused by the server: {refused}"
                self.refused.add(sid)
                self.record_failure(sid, reason)
                return False
            if fut is not None:
                try:
                    result = await asyncio.wait_for(fut, cfg.ack_timeout)
                except asyncio.TimeoutError:
                    problem = (f"try {attempt}: answered, but no dump appeared in "
                               f"{cfg.ack_timeout:.0f} s")
                else:
                    if result == "done":
                        return True
                    return False   # rejected: recorded by the drain, not sent again now
                finally:
                    self.acks.pop(sid, None)
            log.warning("%s: %s", sid, problem)
            if attempt == cfg.max_attempts:
                break
            await asyncio.sleep(sender.backoff(attempt, cfg.backoff_initial, cfg.backoff_max))
            if not await client.healthy():
                await self._wait_healthy(client)
        self.record_failure(sid, problem, said=f"gave up after {cfg.max_attempts} tries: {problem}")
        return False

    def send_window(self, todo):
        """How many samples may be between their request and their durable file at once.

        A sample's task lives until its dump is drained, so this window, not /dev/shm,
        would pace the server once the drain is the slower side: a window of 4 x
        concurrency (128 samples, 15 GB at 2,048 tokens of Kimi-K2) held the server to the
        drain's speed with tens of GB of /dev/shm left (docs/benchmarks.md). The window is
        what fits under the high watermark of the dump dir's filesystem, at the mean size
        of the samples to send; the watermark gate, read before each request, is the bound
        on /dev/shm. At least 4 x concurrency, at most ``SEND_WINDOW_MAX`` (a task is a
        few KB)."""
        low = self.cfg.concurrency * 4
        if not todo:
            return low
        tokens = sum(s.tokens for s in todo)
        mean = max(1, space.estimate(len(todo), tokens, self.cfg.hidden_size,
                                     self.cfg.captured_layers) // len(todo))
        try:
            total = self.usage_fn(self.cfg.dump_dir).total
        except OSError:   # no dump dir yet: the gate says so before the first request
            return low
        return max(low, min(SEND_WINDOW_MAX, int(total * self.cfg.shm_high) // mean))

    async def _send_all(self, todo):
        import aiohttp  # pylint: disable=import-outside-toplevel
        sem = asyncio.Semaphore(self.cfg.concurrency)
        connector = aiohttp.TCPConnector(limit=self.cfg.concurrency + 2)
        async with aiohttp.ClientSession(connector=connector) as session:
            client = sender.Sender(session, self.cfg.server_url, self.cfg.job, self.api_key,
                                   self.cfg.request_timeout)
            await self._wait_healthy(client)
            self.state = "running"
            # a window of tasks, not one per sample: 1M samples must not mean 1M coroutines
            pending = set()
            window = self.send_window(todo)
            log.info("sending %d samples: %d requests at a time, at most %d samples between "
                     "sent and durable", len(todo), self.cfg.concurrency, window)
            try:
                for sample in todo:
                    if len(pending) >= window:
                        done, pending = await asyncio.wait(pending,
                                                           return_when=asyncio.FIRST_COMPLETED)
                        for task in done:
                            task.result()
                    pending.add(asyncio.create_task(self.send_one(client, sem, sample)))
                for task in asyncio.as_completed(pending):
                    await task
            finally:
                # stopped early (the API key refused, the drain failed): no send goes on alone
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)

    async def _send_and_drain(self, todo):
        """Send ``todo`` while the drain runs; a drain that fails stops the sending."""
        stop = asyncio.Event()
        drain_task = asyncio.create_task(self._drain_loop(stop))
        send_task = asyncio.create_task(self._send_all(todo))
        try:
            await asyncio.wait({drain_task, send_task}, return_when=asyncio.FIRST_COMPLETED)
            if drain_task.done():      # before the sending ended: only by failing
                send_task.cancel()
                await asyncio.gather(send_task, return_exceptions=True)
                drain_task.result()
            await send_task
        finally:
            send_task.cancel()
            stop.set()
            # the pass under way ends on its own (see _drain_loop)
            await asyncio.gather(send_task, drain_task, return_exceptions=True)

    # -- the run ----------------------------------------------------------------

    async def run_async(self):
        cfg = self.cfg
        self.pool = concurrent.futures.ThreadPoolExecutor(cfg.drain_workers,
                                                          thread_name_prefix="drain")
        self._loop, self._run_task = asyncio.get_running_loop(), asyncio.current_task()
        try:
            self.load_dataset()
            self.open_output()
            self.watchdog = self.watchdog_factory(self, cfg.stall_window, cfg.stall_restarts_max,
                                                  cfg.output_dir)
            if self.watchdog.counts["restarts"]:
                log.warning("started again after %d stalls in a row (at most %d restarts; the "
                            "count goes back to 0 at the next settled sample)",
                            self.watchdog.counts["restarts"], cfg.stall_restarts_max)
            self.watchdog.start()
            self._status_task = asyncio.create_task(self._status_loop())
            self.rejected_before = {sample_id for sample_id, _attempts, reason, _line in self.manifest.failures()
                                    if drain.REJECTION_RE.fullmatch(reason)}
            self.state = "draining leftovers"
            await self.drain_pass()   # dumps from before this start (any restart) come first
            done_ids = self.manifest.done_ids()
            self.totals = self.manifest.totals()
            accepted = self.accepted_failures()
            todo = [s for s in self.samples.values()
                    if s.sample_id not in done_ids and s.sample_id not in accepted]
            left_tokens = sum(s.tokens for s in todo)
            log.info("resume: %d of %d samples done, %d to send (%d tokens)",
                     len(done_ids & self.samples.keys()), len(self.samples), len(todo), left_tokens)
            try:
                space.check_fits(cfg.output_dir, len(todo), left_tokens, cfg.hidden_size,
                                 cfg.captured_layers, cfg.space_margin,
                                 cfg.output_free_floor_bytes, usage_fn=self.usage_fn)
            except space.NotEnoughSpace as exc:
                raise Refused(str(exc)) from exc
            self.write_card(complete=False)
            self.server_check = capture_check.ServerCheck(
                cfg, self.torch, self.pool, todo[0].input_ids if todo else [])
            await self._send_and_drain(todo)
            await self.drain_pass()
            self.totals = self.manifest.totals()
            # a sample accepted before it failed, failed in this run: accepted too
            left = self.samples.keys() - self.manifest.done_ids() - self.accepted_failures()
            self.state = "incomplete" if left else "complete"
            self.write_card(complete=not left)
            log.info("%s: %d of %d samples, %d tokens, %d bytes", self.state,
                     self.totals["samples"], len(self.samples), self.totals["tokens"],
                     self.totals["bytes"])
            if not left:
                return EXIT_COMPLETE
            again = self.rejected & self.rejected_before
            if left <= self.refused | again:
                # a restart would send them again only to be refused again, or to get the dumps it rejected
                # in this run and the one before (a capture that gives NaN, zeros, a wrong shape for them,
                # every time): stop here, or systemd's restarts go on for ever, each keeping the rejected dumps
                self.error(None, self.cannot_be_helped(left, again))
                return EXIT_REFUSED
            return EXIT_INCOMPLETE
        except DrainFailed as exc:
            self.state = "failed"
            self.error(None, f"the drain stopped, so does the job: {exc}")
            return EXIT_REFUSED if exc.permanent else EXIT_INCOMPLETE
        except Refused as exc:
            self.state = "refused"
            self.error(None, f"refused to start: {exc}")
            return EXIT_REFUSED
        except capture_check.CheckFailed as exc:
            # the capture does not equal what the server computes: no more sample is written
            self.state = exc.state
            self.error(None, f"the capture check failed, the shard stops: {exc}")
            return EXIT_REFUSED
        except sender.FatalError as exc:
            self.state = "failed"
            self.error(None, str(exc))
            return EXIT_REFUSED
        except sender.RetryableError as exc:
            # the server never became healthy: systemd starts the job again later
            self.state = "incomplete"
            self.error(None, f"the server is not answering: {exc}")
            return EXIT_INCOMPLETE
        except asyncio.CancelledError:
            if self.stall_code is None:
                raise
            # the watchdog ended the run (stall.py): restarted by systemd, or stopped for good
            self.state = "stalled"
            return self.stall_code
        finally:
            stalled = self.stall_code is not None
            if self._status_task:
                self._status_task.cancel()
                await asyncio.gather(self._status_task, return_exceptions=True)
            self.write_status()
            self.pool.shutdown(wait=not stalled, cancel_futures=stalled)
            if self.manifest:
                self.manifest.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            # only now: until the run has ended, the watchdog ends a stalled process that
            # something holds (a drain blocked in the kernel, a blocked event loop)
            if self.watchdog is not None:
                self.watchdog.stop()

    def run(self):
        code = asyncio.run(self.run_async())
        if self.stall_code is not None:
            # a drain thread may still be blocked: the interpreter's exit would wait for it
            stall.end_process(code)
        return code
