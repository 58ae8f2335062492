# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One prompt's dump -> its objects in the Mooncake store, confirmed, then the dump removed.

The same order as the files mode's drain (``drain.py``), with the store in the place of
the ``.ckpt``: the dump is loaded and checked with the drain's own functions (ids equal
what was sent, shapes, bf16, the model's hidden size, the layer count, NaN/Inf), and the
capture's layer ids are those the gateway answers; the earlier keys are removed first on
a retry (``replace``); every object is put and seen in the store with its size; only then
is the dump deleted. A dump that cannot be placed (rejected, or the store failed) is
moved aside to durable storage for a person to look at, never dropped.
"""
import logging
import os
import types

from eagle3_extraction_job import drain

log = logging.getLogger("eagle3_extraction_job.gateway")


def dtype_name(torch, dtype):
    """A torch dtype as SpecForge's FeatureSpec names it (``bfloat16``, ``int64``...)."""
    return str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else str(dtype)


def check_provenance(dump, layer_ids):
    """The capture's layer ids are the ones this gateway answers as ``aux_layer_ids``."""
    seen = dump.get("layer_ids")
    if not isinstance(seen, list) or seen != list(layer_ids):
        raise drain.DumpRejected(f"captured with layer ids {seen!r}, the gateway is set up "
                                 f"for {list(layer_ids)} (SGLANG_HS_LAYER_IDS and the "
                                 "gateway's layer_ids differ)")


def tensors_for(torch, dump, spec):
    """``{feature name: tensor}``: the capture's artifacts under the client's names, then
    the client's passthrough tensors as they came."""
    artifacts = {"aux": dump["aux_hidden_state"], "last_hidden": dump["hidden_state"]}
    tensors = {name: artifacts[artifact] for artifact, name in spec.features.items()}
    for item in spec.passthrough:
        tensors[item.name] = torch.tensor(item.data, dtype=torch.int64).reshape(item.shape)
    return tensors


def store_dump(torch, writer, cfg, dump_path, prompt):
    """Blocking (a gateway thread runs it). Returns ``(meta_info spec_capture, bytes put)``;
    raises :class:`drain.DumpRejected` or :class:`mooncake_writer.StoreError` after moving
    the dump aside."""
    spec = prompt.spec
    put_keys = []
    try:
        dump = drain.load_dump(torch, dump_path)
        drain.check_dump(torch, dump, types.SimpleNamespace(input_ids=prompt.input_ids),
                         cfg.hidden_size, len(cfg.layer_ids))
        check_provenance(dump, cfg.layer_ids)
        tensors = tensors_for(torch, dump, spec)
        if spec.replace:
            for name in tensors:
                writer.remove(spec.key(name))
        nbytes = 0
        for name, tensor in tensors.items():
            nbytes += writer.put(spec.key(name), tensor)
            put_keys.append(spec.key(name))
        missing = [key for key in put_keys if not writer.exists(key)]
        if missing:
            raise drain.DumpRejected(f"not in the store after the put: {missing}")
        features = {name: {"shape": list(t.shape), "dtype": dtype_name(torch, t.dtype)}
                    for name, t in tensors.items()}
    except BaseException as exc:
        writer.remove_quietly(put_keys)
        if os.path.exists(dump_path):
            try:
                drain.move_aside(dump_path, cfg.rejected_dir, f"{type(exc).__name__}: {exc}")
            except OSError as move_exc:   # the dump stays where it is: never dropped
                log.error("cannot move %s aside to %s: %s", dump_path, cfg.rejected_dir, move_exc)
        raise
    del dump, tensors
    os.unlink(dump_path)   # every object is in the store: the dump has done its job
    result = {"store_id": spec.store_id, "sample_id": spec.sample_id, "gen": spec.gen,
              "aux_layer_ids": list(cfg.layer_ids), "features": features}
    return result, nbytes
