# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dump the gateway cannot place in the store is never dropped: it is moved aside, with
its reason, and nothing of it stays in the store (a real Mooncake store)."""
import types

import pytest

from online_stack import LAYER_IDS
from eagle3_extraction_job import capture_request, capture_store, drain
from eagle3_extraction_job.mooncake_writer import MooncakeWriter, StoreError
from job_helpers import HIDDEN, LAYERS, write_dump


@pytest.fixture(scope="module")
def writer(store_info):
    cfg = types.SimpleNamespace(local_hostname="127.0.0.1", metadata_server=store_info["metadata_server"],
                                master_server_address=store_info["master_server_address"], protocol="tcp",
                                rdma_devices="", local_buffer_size=32 << 20)
    mooncake = MooncakeWriter(cfg)
    mooncake.setup()
    yield mooncake
    mooncake.store.close()


def prompt_for(ids, sample_id):
    body = {"input_ids": [ids], "spec_capture": [{
        "store_id": "unit", "sample_id": sample_id, "gen": 1,
        "features": {"aux": "hidden_state", "last_hidden": "target"},
        "passthrough": [{"name": "input_ids", "data": ids, "shape": [1, len(ids)], "dtype": "int64"}]}]}
    return capture_request.parse_body(body, 1)[0]


def gateway_cfg(tmp_path, layer_ids):
    return types.SimpleNamespace(hidden_size=HIDDEN, layer_ids=layer_ids, rejected_dir=str(tmp_path / "rejected"))


def test_a_good_dump_is_stored_then_deleted(tmp_path, writer):
    # job_helpers' dumps: the capture's layout, hidden size 16, three layers, layer ids 1,2,3
    path = write_dump(str(tmp_path), "gw-a1", [3, 4, 5])
    result, nbytes = capture_store.store_dump(capture_store_torch(), writer, gateway_cfg(tmp_path, [1, 2, 3]),
                                              path, prompt_for([3, 4, 5], "u:ok"))
    assert result["aux_layer_ids"] == [1, 2, 3]
    assert result["features"]["hidden_state"] == {"shape": [1, 3, HIDDEN * LAYERS], "dtype": "bfloat16"}
    assert nbytes == 3 * HIDDEN * LAYERS * 2 + 3 * HIDDEN * 2 + 3 * 8
    assert writer.exists("unit/u:ok/g1/target") and not (tmp_path / "gw-a1.pt").exists()


@pytest.mark.parametrize("case", ["layer_ids", "ids", "nan", "degenerate", "exists"])
def test_a_dump_that_cannot_be_placed_is_moved_aside_and_leaves_no_key(tmp_path, writer, case):
    torch = capture_store_torch()
    ids, layer_ids, sample_id = [3, 4, 5], [1, 2, 3], f"u:{case}"
    mutate = None
    if case == "layer_ids":
        layer_ids = LAYER_IDS            # the capture ran with other ids than the gateway answers
    elif case == "ids":
        ids = [3, 4, 6]                  # not the prompt that was sent
    elif case == "nan":
        def mutate(payload):
            payload["aux_hidden_state"][0, 1, 2] = float("nan")
    elif case == "degenerate":           # the drain's own check of the values: one layer never written
        def mutate(payload):
            payload["aux_hidden_state"][..., :HIDDEN] = 0
    else:                                # its keys are there from an earlier attempt, no replace
        writer.put(f"unit/{sample_id}/g1/target", torch.zeros(3, dtype=torch.int64))
    path = write_dump(str(tmp_path), "gw-x", [3, 4, 5], mutate=mutate)
    with pytest.raises((drain.DumpRejected, StoreError)):
        capture_store.store_dump(torch, writer, gateway_cfg(tmp_path, layer_ids), path, prompt_for(ids, sample_id))
    assert not (tmp_path / "gw-x.pt").exists()
    kept = sorted(p.name for p in (tmp_path / "rejected").iterdir())
    assert len(kept) == 2 and kept[1].endswith(".reason")
    if case == "degenerate":
        assert "degenerate aux_hidden_state: layer 1 of 3" in (tmp_path / "rejected" / kept[1]).read_text()
    assert not writer.exists(f"unit/{sample_id}/g1/hidden_state")
    assert not writer.exists(f"unit/{sample_id}/g1/input_ids")
    assert writer.exists(f"unit/{sample_id}/g1/target") == (case == "exists")   # the earlier attempt's kept


def capture_store_torch():
    import torch  # pylint: disable=import-outside-toplevel
    return torch
