# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stall watchdog: a shard that settles no sample for ``stall_window`` seconds while samples
are left and nothing excuses the wait has stalled (a hung drain, a wedged server, a lost request).

A sample settles when its file is durable or its failure is recorded (a server that refuses every
sample is not stuck: each refusal is an answer). The window does not run while the job waits on
what a restart cannot fix and status already names: the server not healthy, the output disk under
its floor.

The watchdog is a thread of its own, so that it sees a stall of the event loop too. On a stall it
says so (status.json, the log), counts the restart in ``stall.json`` in the shard's output dir, and
ends the process: with ``EXIT_STALL_RESTART`` (systemd restarts the unit; the start resumes from
the durable state) while the count of restarts since the last settled sample is within
``stall_restarts_max``, else with ``EXIT_STALLED``, which the unit does not restart. The run is
first asked to end on its own (its status written, its files closed); past ``GRACE_S`` the process
ends at once (a drain thread blocked in the kernel would hold it for good), which is as safe as a
kill at any point.
"""
import contextlib
import json
import logging
import os
import threading
import time

from eagle3_extraction_job import status

log = logging.getLogger("eagle3_extraction_job")

EXIT_STALL_RESTART = 3   # stalled, restarted by systemd (Restart=on-failure)
EXIT_STALLED = 4         # stalled past the bound: RestartPreventExitStatus keeps it stopped

STATE_FILE = "stall.json"
# how long the run may take to end on its own once stalled, before the process ends at once
GRACE_S = 20.0


def read_counts(output_dir):
    """``{"restarts": consecutive stall restarts, "restarts_total": all of them}`` from stall.json
    (zeros when there is none; a damaged one counts as none, with a warning)."""
    path = os.path.join(output_dir, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        counts = {key: raw[key] for key in ("restarts", "restarts_total")}
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in counts.values()):
            raise ValueError("counts are not integers >= 0")
        return counts
    except FileNotFoundError:
        return {"restarts": 0, "restarts_total": 0}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s is unreadable (%s): the stall restarts count from 0", path, exc)
        return {"restarts": 0, "restarts_total": 0}


def write_counts(output_dir, counts, last=""):
    status.write_json_atomic(os.path.join(output_dir, STATE_FILE),
                             dict(counts, last_stall=last), mode=status.STATUS_MODE)


def waiting_on(in_flight, answered, draining, left, now, check=""):
    """What a stalled shard waits on, in words.

    in_flight: {sample id: monotonic time its request went} (sent, no answer yet); answered: how many
    answered requests wait for their dump; draining: {dump path: monotonic time its drain began};
    check: what the capture check waits on, in words (its prompt is no sample's request: a server
    wedged before a restarted run's check is waited on there, not "nothing sent")."""
    parts = [check] if check else []
    if in_flight:
        parts.append(f"{len(in_flight)} requests sent and unanswered, the oldest for "
                     f"{now - min(in_flight.values()):.0f} s")
    if answered:
        parts.append(f"{answered} answered requests whose dump has not appeared")
    if draining:
        parts.append(f"{len(draining)} dumps waiting for the drain, the oldest for "
                     f"{now - min(draining.values()):.0f} s")
    if not parts:
        parts.append(f"nothing sent ({left} samples left)")
    return "; ".join(parts)


def end_process(code, hard_exit=os._exit):  # pylint: disable=protected-access
    """End the process now with ``code``, its log flushed: no wait for threads (a drain blocked
    in the kernel would hold a normal exit for good); as safe as a kill, which every write
    survives (temporary name, fsync, rename; the manifest is SQLite)."""
    for handler in logging.getLogger().handlers + log.handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    hard_exit(code)


class Watchdog:  # pylint: disable=too-many-instance-attributes
    """Watches one run of a job (see the module's doc).

    ``job`` gives ``samples_left()``, ``stall_waits()`` (the words of :func:`waiting_on`),
    ``stall_waiting_on`` and ``stall_quiet_s`` (set here before) and ``stalled(reason, code)``
    (called on the watchdog's thread: set the state, write status.json, ask the run to end);
    ``hard_exit`` ends the process (``os._exit``; tests give another)."""

    def __init__(self, job, window, restarts_max, output_dir, clock=time.monotonic,
                 hard_exit=os._exit, grace=GRACE_S):  # pylint: disable=protected-access
        self.job = job
        self.window, self.restarts_max = window, restarts_max
        self.output_dir = output_dir
        self.clock, self.hard_exit, self.grace = clock, hard_exit, grace
        self.counts = read_counts(output_dir)
        self.last_progress = clock()
        self.excuses = 0
        self.fired = None          # (reason, exit code) once stalled
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    # -- what the run tells it (the event loop's thread) -----------------------

    def progress(self):
        """A sample settled: the window starts again, and the restarts since the last settled
        sample are back at 0."""
        with self._lock:
            self.last_progress = self.clock()
            reset = self.counts["restarts"] > 0
            if reset:
                self.counts = dict(self.counts, restarts=0)
        if reset:
            try:
                write_counts(self.output_dir, self.counts)
            except OSError as exc:
                log.warning("cannot write %s: %s", STATE_FILE, exc)

    @contextlib.contextmanager
    def excused(self):
        """A wait a restart cannot end, which status names (the server not healthy, the output
        disk full): the window does not run during it and starts again after it."""
        with self._lock:
            self.excuses += 1
        try:
            yield
        finally:
            with self._lock:
                self.excuses -= 1
                self.last_progress = self.clock()

    # -- the watching thread ---------------------------------------------------

    def start(self):
        self._thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()

    def quiet_for(self):
        """Seconds without a settled sample that count (0 during an excused wait)."""
        with self._lock:
            if self.excuses:
                self.last_progress = self.clock()
            return self.clock() - self.last_progress

    def _watch(self):
        step = min(1.0, self.window / 4)
        while not self._stop.wait(step):
            quiet = self.quiet_for()
            if quiet < self.window or not self.job.samples_left():
                continue
            self._fire(quiet)
            return

    def _fire(self, quiet):
        waits = self.job.stall_waits()
        restarts = self.counts["restarts"]
        if restarts < self.restarts_max:
            code = EXIT_STALL_RESTART
            self.counts = {"restarts": restarts + 1, "restarts_total": self.counts["restarts_total"] + 1}
            then = f"restart {restarts + 1} of at most {self.restarts_max}"
        else:
            code = EXIT_STALLED
            then = (f"stopped: {restarts} restarts since the last durable sample did not help "
                    f"(the bound, stall_restarts_max, is {self.restarts_max})")
        reason = f"no sample settled for {quiet:.0f} s, waiting on {waits}; {then}"
        self.job.stall_waiting_on = waits
        self.job.stall_quiet_s = round(quiet, 1)
        try:
            write_counts(self.output_dir, self.counts, last=reason)
        except OSError as exc:
            log.error("cannot write %s: %s", STATE_FILE, exc)
        self.fired = (reason, code)
        log.error("stalled: %s", reason)
        try:
            self.job.stalled(reason, code)
        except Exception:  # pylint: disable=broad-except
            log.exception("the stalled run could not be asked to end")
        # the run ends on its own within the grace (the process then exits with ``code``);
        # else, something holds it (a drain blocked in the kernel): it ends here
        if not self._stop.wait(self.grace):
            log.error("the stalled run did not end within %.0f s: the process ends now", self.grace)
            end_process(code, self.hard_exit)
