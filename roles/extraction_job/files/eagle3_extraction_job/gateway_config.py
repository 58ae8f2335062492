# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capture gateway's settings: one JSON file written by the ``extraction_job`` role.

Every value is checked whole before anything runs; a bad one raises
:class:`~eagle3_extraction_job.config.ConfigError` naming the key and the value. No secret
is here: the SGLang API key is in a root-only file the config names (``api_key_file``).
"""
import dataclasses
import math
import os
import re

from eagle3_extraction_job import names
from eagle3_extraction_job.config import ConfigError, dataclass_from, read_json

HOST_RE = re.compile(r"[A-Za-z0-9_.:-]{1,253}")
MOONCAKE_PROTOCOLS = ("tcp", "rdma")


@dataclasses.dataclass
class MooncakeConfig:
    """The gateway's Mooncake client. It mounts no global segment: objects go to the
    segment of the master's host (the mooncake_master role's segment holder)."""
    local_hostname: str            # the address the peers reach this host at (bind address)
    metadata_server: str           # http://<master>:<port>/metadata
    master_server_address: str     # <master>:<rpc port>
    protocol: str = "tcp"
    rdma_devices: str = ""
    local_buffer_size: int = 512 << 20

    def validate(self):
        def bad(key, why):
            raise ConfigError(f"mooncake.{key}={getattr(self, key)!r}: {why}")

        if not isinstance(self.local_hostname, str) or not HOST_RE.fullmatch(self.local_hostname):
            bad("local_hostname", "expected a host name or address")
        if not isinstance(self.metadata_server, str) or not re.fullmatch(
                r"http://[A-Za-z0-9_.:\[\]-]{1,260}/metadata", self.metadata_server):
            bad("metadata_server", "expected http://<host>:<port>/metadata")
        if not isinstance(self.master_server_address, str) or not re.fullmatch(
                r"[A-Za-z0-9_.:\[\]-]{1,253}:[0-9]{1,5}", self.master_server_address):
            bad("master_server_address", "expected <host>:<port>")
        if self.protocol not in MOONCAKE_PROTOCOLS:
            bad("protocol", f"expected one of {', '.join(MOONCAKE_PROTOCOLS)}")
        if not isinstance(self.rdma_devices, str) or not re.fullmatch(r"[A-Za-z0-9_,:-]{0,256}",
                                                                      self.rdma_devices):
            bad("rdma_devices", "expected comma-separated device names (or empty)")
        if isinstance(self.local_buffer_size, bool) or not isinstance(self.local_buffer_size, int) \
                or not 0 <= self.local_buffer_size <= 1 << 40:
            bad("local_buffer_size", "expected an integer number of bytes from 0 to 1 TiB")


@dataclasses.dataclass
class GatewayConfig:  # pylint: disable=too-many-instance-attributes
    # the rid prefix of the gateway's requests (``<job>-<token>``): the capture dumps only
    # rids with its SGLANG_HS_DUMP_RID_PREFIX, so this is the job name the role gives it
    job: str
    server_url: str
    dump_dir: str
    # where a dump that cannot be placed in the store is kept (durable storage, not tmpfs)
    rejected_dir: str
    mooncake: MooncakeConfig
    # the capture's SGLANG_HS_LAYER_IDS (SpecForge's convention: the draft's
    # eagle_aux_hidden_state_layer_ids), answered as each row's aux_layer_ids
    layer_ids: list = dataclasses.field(default_factory=lambda: [1, 29, 57])
    hidden_size: int = 0           # the model's; 0: not checked
    listen_host: str = "127.0.0.1"
    listen_port: int = 30080
    api_key_file: str = ""
    request_timeout: float = 600.0  # one prompt's POST to SGLang
    ack_timeout: float = 600.0      # after SGLang's 200, how long the dump may take
    # how long a prompt waits for its SGLang server to answer again (a restart) before its row fails; under
    # SpecForge's own timeout for one POST (300 s); the role's extraction_job_gateway_server_wait
    server_wait: float = 120.0
    poll_interval: float = 0.02
    max_prompts: int = 1024         # prompts in one POST at most
    store_threads: int = 8          # threads doing the blocking work (load, check, Mooncake)
    stop_timeout: float = 120.0     # SIGTERM: how long in-flight prompts may take to finish

    def __post_init__(self):
        if isinstance(self.mooncake, dict):
            known = {f.name for f in dataclasses.fields(MooncakeConfig)}
            unknown = sorted(set(self.mooncake) - known)
            if unknown:
                raise ConfigError(f"unknown keys in mooncake: {', '.join(unknown)}")
            try:
                self.mooncake = MooncakeConfig(**self.mooncake)
            except TypeError as exc:
                raise ConfigError(f"mooncake: {exc}") from exc
        if not isinstance(self.mooncake, MooncakeConfig):
            raise ConfigError(f"mooncake={self.mooncake!r}: expected an object")
        self.validate()

    def validate(self):  # pylint: disable=too-many-branches
        def bad(key, why):
            raise ConfigError(f"{key}={getattr(self, key)!r}: {why}")

        if not names.valid_job(self.job):
            bad("job", f"expected {names.JOB_RE.pattern}")
        for key in ("dump_dir", "rejected_dir"):
            value = getattr(self, key)
            if not isinstance(value, str) or not os.path.isabs(value) \
                    or any(ord(c) < 32 or ord(c) == 127 for c in value):
                bad(key, "expected an absolute path without control characters")
        if os.path.abspath(self.rejected_dir) == os.path.abspath(self.dump_dir):
            bad("rejected_dir", "must not be the dump dir")
        if not isinstance(self.api_key_file, str) or any(
                ord(c) < 32 or ord(c) == 127 for c in self.api_key_file):
            bad("api_key_file", "expected a path without control characters")
        if not isinstance(self.server_url, str) or not re.fullmatch(
                r"https?://[A-Za-z0-9_.:\[\]-]{1,260}/?", self.server_url):
            bad("server_url", "expected http(s)://<host>:<port>")
        if not isinstance(self.listen_host, str) or not HOST_RE.fullmatch(self.listen_host):
            bad("listen_host", "expected a host name or address")
        if not isinstance(self.layer_ids, list) or not self.layer_ids or any(
                isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < 10000
                for i in self.layer_ids) or len(set(self.layer_ids)) != len(self.layer_ids):
            bad("layer_ids", "expected a non-empty list of distinct layer ids >= 0")
        ints = {"hidden_size": (0, 1 << 20), "listen_port": (1, 65535),
                "max_prompts": (1, 1 << 16), "store_threads": (1, 256)}
        for key, (low, high) in ints.items():
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                bad(key, f"expected an integer from {low} to {high}")
        for key in ("request_timeout", "ack_timeout", "server_wait", "poll_interval", "stop_timeout"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or not 0 < value <= 86400:
                bad(key, "expected a finite number of seconds > 0 (at most a day)")
        self.mooncake.validate()


def from_dict(raw):
    return dataclass_from(GatewayConfig, raw, ("job", "server_url", "dump_dir", "rejected_dir", "mooncake"))


def load(path):
    return from_dict(read_json(path))
