# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tensors into the Mooncake store, in SpecForge's ``MooncakeFeatureStore`` layout.

One object per tensor under ``{store_id}/{sample_id}/g{gen}/{name}`` whose value is the
tensor's raw contiguous bytes (shape and dtype travel in the ref the client builds from the
gateway's answer). Objects are hard-pinned, as SpecForge's own writers pin them: SpecForge
frees them when the trainer has consumed them, never Mooncake's LRU.

Every call blocks (Mooncake's client is synchronous): the gateway runs them on its threads.
"""
import logging

log = logging.getLogger("eagle3_extraction_job.gateway")

# Mooncake's answers that matter here (mooncake-store's ErrorCode)
OBJECT_NOT_FOUND = -704


class StoreError(RuntimeError):
    """A put, a check or a removal in the store failed."""


class MooncakeWriter:
    """The gateway's Mooncake client: no global segment of its own (``global_segment_size``
    0), so the objects live in the segment of the master's host."""

    def __init__(self, mooncake_cfg):
        self.cfg = mooncake_cfg
        self.store = None
        self._replicate = None

    def setup(self):
        """Connect; raises :class:`StoreError` (the gateway retries and is unhealthy meanwhile)."""
        from mooncake.store import (  # pylint: disable=import-outside-toplevel
            MooncakeDistributedStore, ReplicateConfig)
        store = MooncakeDistributedStore()
        cfg = self.cfg
        rc = store.setup(cfg.local_hostname, cfg.metadata_server, 0, cfg.local_buffer_size,
                         cfg.protocol, cfg.rdma_devices, cfg.master_server_address)
        if rc is not None and int(rc) != 0:
            raise StoreError(f"Mooncake setup failed (status {rc}) with master "
                             f"{cfg.master_server_address}, metadata {cfg.metadata_server}")
        replicate = ReplicateConfig()
        replicate.replica_num = 1
        replicate.with_hard_pin = True
        self._replicate = replicate
        self.store = store

    @property
    def ready(self):
        return self.store is not None

    def exists(self, key):
        rc = int(self.store.is_exist(key))
        if rc < 0:
            raise StoreError(f"is_exist({key}) failed (status {rc})")
        return rc == 1

    def remove(self, key):
        """Remove ``key`` now (``force``: the read lease of a fresh object is not waited for);
        True if it was there. Raises unless it is gone afterwards."""
        rc = int(self.store.remove(key, force=True))
        if rc not in (0, OBJECT_NOT_FOUND):
            raise StoreError(f"remove({key}) failed (status {rc})")
        if self.exists(key):
            raise StoreError(f"remove({key}) answered {rc} but the key is still there")
        return rc == 0

    def put(self, key, tensor):
        """Put ``tensor``'s bytes under ``key`` and see the object there with its size;
        returns the bytes put. A key that exists is refused (Mooncake's put would keep the
        old value and answer success): the caller removes it first when replacing."""
        tensor = tensor.contiguous()
        nbytes = tensor.numel() * tensor.element_size()
        if self.exists(key):
            raise StoreError(f"{key} already exists (a retry must say replace: true)")
        ptr = tensor.data_ptr()
        registered = int(self.store.register_buffer(ptr, nbytes)) == 0
        try:
            rc = self.store.put_from(key, ptr, nbytes, self._replicate)
        finally:
            if registered:
                self.store.unregister_buffer(ptr)
        if rc is not None and int(rc) < 0:
            raise StoreError(f"put_from({key}, {nbytes} bytes) failed (status {rc})")
        size = int(self.store.get_size(key))
        if size != nbytes:
            self.remove_quietly([key])
            raise StoreError(f"{key}: the store holds {size} bytes after the put, not {nbytes}")
        return nbytes

    def remove_quietly(self, keys):
        """Best effort, after a failed row: the client's discard cleans up what is left."""
        for key in keys:
            try:
                self.remove(key)
            except Exception as exc:  # pylint: disable=broad-except
                log.warning("could not remove %s after a failed put: %s", key, exc)
