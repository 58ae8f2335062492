# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job's settings: one JSON file written by the ``extraction_job`` role.

Every value is checked whole before anything runs; a bad one raises
:class:`ConfigError` naming the key and the value. The API key is not here: the
config names a root-only file that holds it.
"""
import dataclasses
import json
import math
import os

from eagle3_extraction_job import names


class ConfigError(ValueError):
    """A setting is missing or out of range."""


@dataclasses.dataclass
class JobConfig:  # pylint: disable=too-many-instance-attributes
    job: str
    dataset: str
    output_dir: str
    dump_dir: str = "/dev/shm/sglang_hs"
    # the dirs the server role moved undrained dumps aside to, a glob (the role writes it); empty: none
    dump_dir_aside_glob: str = ""
    status_file: str = ""
    host: str = ""
    # dataset
    dataset_format: str = "auto"           # auto | tokenized | conversations
    tokenizer_path: str = ""               # conversations: the model's tokenizer
    chat_assistant_header: str = ""        # conversations: where an assistant turn starts
    chat_end_of_turn: str = ""             # conversations: where a turn ends
    chat_system_prompt: str = ""
    # conversations: text never trained on, wherever it is (SpecForge's ignore_token)
    chat_ignore_tokens: list = dataclasses.field(default_factory=list)
    # failed samples the user accepts as not extracted (extraction_job_accept_failed): not sent again, and
    # the shard is complete without them
    accept_failed: list = dataclasses.field(default_factory=list)
    max_length: int = 0                    # conversations: truncate (0: no limit)
    shard_index: int = 0
    shard_count: int = 1
    # server
    # no default: the port is the server's (the role passes sglang_server's URL), never a guess
    server_url: str = ""
    api_key_file: str = ""
    concurrency: int = 16
    request_timeout: float = 600.0
    max_attempts: int = 8
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    ack_timeout: float = 600.0             # after a 200, how long the dump may take
    health_timeout: float = 3600.0         # how long to wait for the server at start
    # drain
    drain_workers: int = 4
    poll_interval: float = 0.2
    # model (for the space estimate and the checks)
    model_path: str = ""
    hidden_size: int = 0                   # 0: read config.json under model_path
    captured_layers: int = 3
    capture_patch_sha256: str = ""
    # the capture checked against the server's return_hidden_states after each (re)start
    # (capture_check.py; the server needs --enable-return-hidden-states)
    capture_check: bool = True
    # space and backpressure
    space_margin: float = 0.10
    shm_high: float = 0.70
    shm_low: float = 0.50
    output_free_floor_bytes: int = 8 * 2**30
    output_free_resume_bytes: int = 12 * 2**30
    status_interval: float = 2.0
    # the stall watchdog (stall.py): no sample settled for this long while samples are left and
    # the server is healthy is a stall; restarts in a row past the bound stop the job
    stall_window: float = 900.0
    stall_restarts_max: int = 3
    # node_exporter's textfile dir: each status tick writes the shard's Prometheus metrics there
    # (metrics.py); empty: none
    metrics_dir: str = ""

    def __post_init__(self):
        self.validate()

    def validate(self):  # pylint: disable=too-many-branches
        def bad(key, why):
            raise ConfigError(f"{key}={getattr(self, key)!r}: {why}")

        if not names.valid_job(self.job):
            bad("job", f"expected {names.JOB_RE.pattern} (no '-': it separates job and sample id)")
        for key in ("dataset", "output_dir", "dump_dir"):
            value = getattr(self, key)
            if not isinstance(value, str) or not os.path.isabs(value):
                bad(key, "expected an absolute path")
        if self.metrics_dir and (not isinstance(self.metrics_dir, str) or not os.path.isabs(self.metrics_dir)):
            bad("metrics_dir", "expected an absolute path, or empty for no metrics")
        for key in ("dataset", "output_dir", "dump_dir", "dump_dir_aside_glob", "status_file",
                    "tokenizer_path", "api_key_file", "model_path", "host", "server_url", "metrics_dir"):
            value = getattr(self, key)
            if not isinstance(value, str) or any(ord(c) < 32 or ord(c) == 127 for c in value):
                bad(key, "expected a string without control characters")
        if os.path.abspath(self.output_dir) in ("/", os.path.abspath(self.dump_dir)):
            bad("output_dir", "must be its own directory, not / nor the dump dir")
        if self.dataset_format not in ("auto", "tokenized", "conversations"):
            bad("dataset_format", "expected auto, tokenized or conversations")
        if not self.server_url:
            bad("server_url", "required: the URL of the server the job sends to (the extraction_job role "
                "passes the sglang_server role's)")
        if not self.server_url.startswith(("http://", "https://")):
            bad("server_url", "expected an http:// or https:// URL")
        ints = {"shard_count": 1, "shard_index": 0, "concurrency": 1, "max_attempts": 1,
                "drain_workers": 1, "captured_layers": 1, "hidden_size": 0, "max_length": 0,
                "output_free_floor_bytes": 0, "output_free_resume_bytes": 0,
                "stall_restarts_max": 0}
        for key, minimum in ints.items():
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                bad(key, f"expected an integer >= {minimum}")
        if not isinstance(self.chat_ignore_tokens, list) or any(
                not isinstance(t, str) or not t for t in self.chat_ignore_tokens):
            bad("chat_ignore_tokens", "expected a list of non-empty strings")
        if not isinstance(self.accept_failed, list) or any(
                not names.valid_sample_id(s) for s in self.accept_failed):
            bad("accept_failed", f"expected a list of sample ids, each {names.SAMPLE_ID_RE.pattern} "
                "(one by one: no pattern)")
        if self.shard_index >= self.shard_count:
            bad("shard_index", f"expected 0 <= shard_index < shard_count ({self.shard_count})")
        floats = ("request_timeout", "backoff_initial", "backoff_max", "ack_timeout",
                  "health_timeout", "poll_interval", "status_interval", "stall_window")
        for key in floats:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                bad(key, "expected a finite number > 0")
        for key in ("shm_high", "shm_low", "space_margin"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or not 0 <= value <= 1:
                bad(key, "expected a number between 0 and 1")
        if self.shm_low > self.shm_high:
            bad("shm_low", f"must not exceed shm_high ({self.shm_high})")
        if self.output_free_resume_bytes < self.output_free_floor_bytes:
            bad("output_free_resume_bytes",
                f"must be at least output_free_floor_bytes ({self.output_free_floor_bytes})")
        if not isinstance(self.capture_check, bool):
            bad("capture_check", "expected true or false")
        if self.capture_patch_sha256 and (len(self.capture_patch_sha256) != 64 or any(
                c not in "0123456789abcdef" for c in self.capture_patch_sha256)):
            bad("capture_patch_sha256", "expected 64 lower-case hex digits")

    @property
    def manifest_path(self):
        return os.path.join(self.output_dir, "manifest.sqlite")

    @property
    def card_path(self):
        return os.path.join(self.output_dir, "dataset_card.json")

    @property
    def effective_status_file(self):
        return self.status_file or os.path.join(self.output_dir, "status.json")


def dataclass_from(cls, raw, required):
    """``cls(**raw)`` of a config read from JSON: an object, no key ``cls`` does not have, every ``required`` one
    given (the gateway's config is read the same way)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a JSON object, got {type(raw).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown keys in the config: {', '.join(unknown)}")
    missing = sorted(k for k in required if k not in raw)
    if missing:
        raise ConfigError(f"missing keys in the config: {', '.join(missing)}")
    return cls(**raw)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON: {exc}") from exc


def from_dict(raw):
    return dataclass_from(JobConfig, raw, ("job", "dataset", "output_dir", "server_url"))


def load(path):
    return from_dict(read_json(path))


def read_api_key(path):
    """The key from a root-only file; refuses a file others can read."""
    if not path:
        return ""
    st = os.stat(path)
    if st.st_mode & 0o077:
        raise ConfigError(
            f"api_key_file={path!r}: mode {st.st_mode & 0o777:o} lets others read it; "
            "expected 0600 or 0400")
    with open(path, encoding="utf-8") as f:
        key = f.read().strip()
    if any(ord(c) < 33 or ord(c) == 127 for c in key):
        raise ConfigError(f"api_key_file={path!r}: the key holds whitespace or control characters")
    return key
