# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shard's Prometheus metrics: a text file for node_exporter's textfile collector.

Written at each status tick, from the same snapshot as status.json, to
``<metrics_dir>/eagle3_extraction_<job>_shard<index>.prom``: a temporary name that
node_exporter does not read (``.<name>.prom.<pid>.tmp``, not ``*.prom``), fsync, rename, so
the collector never reads half of one. A file stays after its job ends or dies: its last
state stays visible, and ``eagle3_job_metrics_updated_timestamp_seconds`` says how old it is
(a job at work whose file is older than a few status intervals has stopped writing).

The series and their labels are the contract with the monitoring role's alert rules and
dashboard (the issue's metrics spec): change one only with them. No ``host`` label: the
scrape config gives every target one.
"""
import logging
import math
import os

log = logging.getLogger("eagle3_extraction_job")

METRICS_MODE = 0o644
PREFIX = "eagle3_job_"

# every state the job's status.json may hold (job.py, capture_check.py), each a series of
# eagle3_job_state, 1 for the current one and 0 for the others, so that a rule can read
# `eagle3_job_state{state="running"} == 1` without knowing the others; names as the status
# table shows them, but one word each ("draining leftovers" -> "draining"). A process that
# died cannot say "stopped": its file's age does (eagle3_job_metrics_updated_timestamp_seconds).
STATES = ("starting", "draining", "running", "paused", "stalled", "complete", "incomplete", "failed",
          "refused", "capture_mismatch", "capture_check_unavailable")
STATE_NAMES = {"draining leftovers": "draining"}

# (name without the prefix, help, the snapshot's key or that of the extra values)
GAUGES = (
    ("samples", "Samples in the shard.", "samples_total"),
    ("samples_done", "Samples durable (status.json samples_done).", "samples_done"),
    ("samples_failed", "Samples whose last try failed.", "samples_failed"),
    ("bad_lines", "The dataset's bad lines this shard counts.", "bad_lines"),
    ("tokens", "Tokens in the shard.", "tokens_total"),
    ("tokens_done", "Tokens durable.", "tokens_done"),
    ("bytes_done", "Bytes durable.", "bytes_done"),
    ("tokens_per_second", "Tokens made durable a second, over the last two minutes.", "tokens_per_s"),
    ("eta_seconds", "Seconds until the shard is done at the current rate (absent when unknown).", "eta_s"),
    ("started_timestamp_seconds", "When this run of the job's process started (unix time).", "started_at"),
    ("last_durable_sample_timestamp_seconds",
     "When this process last made a sample durable (unix time); the process start until the first.",
     "last_durable_at"),
    ("shm_used_bytes", "Bytes in use on the dump dir's filesystem (/dev/shm).", "shm_used_bytes"),
    ("shm_size_bytes", "Size of the dump dir's filesystem (/dev/shm).", "shm_total_bytes"),
    ("shm_high_watermark_bytes", "The dump dir's high watermark: no request goes while /dev/shm is above it.",
     "shm_high_watermark_bytes"),
    ("output_free_bytes", "Bytes free on the output disk.", "output_free_bytes"),
    ("output_floor_bytes", "The output disk's floor: the job pauses while less is free.", "output_floor_bytes"),
    ("errors", "Errors the job logged (status.json errors), drain errors included.", "errors"),
    ("restarts", "Restarts after a stall, in all (status.json stall_restarts_total).", "stall_restarts_total"),
)
STATE_HELP = "1 for the shard's current state, 0 for every other state of the job."
UPDATED = ("metrics_updated_timestamp_seconds", "When this file was written (unix time).")


def file_name(job, shard_index):
    return f"eagle3_extraction_{job}_shard{shard_index}.prom"


def escape_label(value):
    """A label value as the text format holds it between double quotes."""
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def number(value):
    """A sample's value in the text format: an integer as it is, a float exactly (repr), NaN and +-Inf by name."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def state_name(state):
    return STATE_NAMES.get(state, state)


def render(snap, extra, now):
    """The file's text: ``snap`` the status snapshot (job.Job.snapshot), ``extra`` the values status.json does
    not hold (``shm_high_watermark_bytes``, ``output_floor_bytes``, ``last_durable_at``), ``now`` the time the
    file is written (unix time)."""
    values = dict(snap, **extra)
    labels = ",".join(f'{key}="{escape_label(value)}"' for key, value in (
        ("extraction_job", snap["job"]), ("shard", snap["shard_index"]), ("shard_count", snap["shard_count"])))
    lines = []

    def gauge(name, help_text, samples):
        lines.append(f"# HELP {PREFIX}{name} {help_text}")
        lines.append(f"# TYPE {PREFIX}{name} gauge")
        for extra_labels, value in samples:
            lines.append(f"{PREFIX}{name}{{{labels}{extra_labels}}} {number(value)}")

    for name, help_text, key in GAUGES:
        value = values.get(key)
        # an unknown value (the ETA before a rate) is no series at all, never a made-up 0
        gauge(name, help_text, [] if value is None else [("", value)])
    current = state_name(snap["state"])
    # a state this list does not know still shows (a rule for it can be written); never lost
    states = STATES if current in STATES else STATES + (current,)
    gauge("state", STATE_HELP, [(f',state="{escape_label(s)}"', int(s == current)) for s in states])
    gauge(*UPDATED, [("", now)])
    return "\n".join(lines) + "\n"


def write_atomic(path, text, mode=METRICS_MODE):
    """Replace ``path`` with ``text``: a temporary name in the same dir, fsync, rename."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o755, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with open(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)   # whatever the umask: node_exporter reads it as its own user
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write(metrics_dir, snap, extra, now):
    """Write the shard's file; a failure is logged, never raised: metrics must not stop the job."""
    path = os.path.join(metrics_dir, file_name(snap["job"], snap["shard_index"]))
    try:
        write_atomic(path, render(snap, extra, now))
        return True
    except Exception as exc:  # pylint: disable=broad-except
        log.warning("cannot write the metrics file %s: %s", path, exc)
        return False
