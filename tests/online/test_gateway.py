# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capture gateway serves SpecForge 0.2.0's server-capture contract: SpecForge's own
adapter (``SGLangServerCaptureAdapter.produce_refs``) drives it, SpecForge's own store
(``MooncakeFeatureStore.get``) reads every sample back from a real Mooncake store, and each
sample's features are bit for bit the tensors the files mode writes for the same prompt from
the same server (its drain's ``.ckpt``, read by SpecForge's offline loader)."""
import array
import asyncio
import os

import aiohttp
import pytest
import torch
from specforge.algorithms.eagle3.providers import create_registration
from specforge.inference.adapters import server_capture
from specforge.inference.adapters.server_capture import (SGLangServerCaptureAdapter,
                                                         ServerCaptureFailure, ServerCaptureSchema)
from specforge.inference.capture import CaptureConfig
from specforge.runtime.contracts import PromptTask, SampleRef
from specforge.runtime.data_plane.feature_store import load_feature_file
from specforge.runtime.data_plane.mooncake_store import MooncakeFeatureStore

from online_stack import HIDDEN, KEY, LAYER_IDS, get_json
from eagle3_extraction_job import dataset, drain, manifest, names, sender

RUN = "run1"


@pytest.fixture(scope="module")
def eagle3():
    """SpecForge's eagle3 contract for the stand-in's model, from its own registration."""
    registration = create_registration()
    streaming = registration.providers.server_streaming_for("text")
    layout = streaming.layout
    schema = ServerCaptureSchema(aux_feature=layout.aux_feature, last_hidden_feature=layout.last_hidden_feature,
                                 passthrough=layout.passthrough,
                                 attention_mask_feature=layout.attention_mask_feature)
    capture = CaptureConfig.from_strategy(
        required_features=registration.spec.feature_contract("streaming", "text").required_tensors,
        aux_hidden_state_layer_ids=tuple(LAYER_IDS), target_repr=streaming.target_representation,
        target_hidden_size=HIDDEN)
    return registration.name, schema, capture


@pytest.fixture(scope="module")
def store(store_info):
    """SpecForge's store on its real Mooncake client (no segment of its own, as the trainer's)."""
    feature_store = MooncakeFeatureStore(store_id=RUN, setup_kwargs={
        "local_hostname": "127.0.0.1", "metadata_server": store_info["metadata_server"],
        "master_server_addr": store_info["master_server_address"], "global_segment_size": 0,
        "local_buffer_size": 64 << 20, "protocol": "tcp", "rdma_devices": ""})
    yield feature_store
    feature_store._store.close()  # pylint: disable=protected-access  # before the master goes


def adapter_for(gateway, store, eagle3, post_fn=None):
    algorithm, schema, _capture = eagle3
    return SGLangServerCaptureAdapter(gateway["url"], store, run_id=RUN, algorithm=algorithm, schema=schema,
                                      timeout_s=120, post_fn=post_fn)


def task(task_id, ids, attempt=0):
    mask = [0] * (len(ids) // 2) + [1] * (len(ids) - len(ids) // 2)
    return PromptTask(task_id=task_id, run_id=RUN, source_id="test", max_length=4096, attempt=attempt,
                      payload={"input_ids": ids, "loss_mask": mask})


def prompts(count, prefix):
    return [task(f"{prefix}{n}", [(n * 131 + k * 17) % 50000 for k in range(3 + n * 5)]) for n in range(count)]


def files_mode_ckpt(server, tmp_path, sample_id, ids, mask):
    """The files mode's output for this prompt from the same server: the job's request (its
    sender), the capture's dump, the job's drain into a ``.ckpt``, SpecForge's offline loader."""
    async def send():
        async with aiohttp.ClientSession() as session:
            client = sender.Sender(session, server["url"], "files", api_key=KEY)
            await client.generate(sample)
    sample = dataset.Sample(sample_id, input_ids=array.array("q", ids), loss_mask=array.array("q", mask))
    asyncio.run(send())
    dump = server["dump"] / names.dump_name_for("files", sample_id)
    for _try in range(500):
        if dump.exists():
            break
        asyncio.run(asyncio.sleep(0.02))
    out = tmp_path / "out"
    drainer = drain.Drainer(torch, manifest.open_manifest(str(out)), str(out), hidden_size=HIDDEN,
                            captured_layers=len(LAYER_IDS))
    outcome, row = drainer.drain(str(dump), sample)
    assert outcome == "done"
    return load_feature_file(os.path.join(out, row["path"]))


def dumps_left(gateway):
    return sorted(p.name for p in gateway["dump"].iterdir() if p.name.endswith((".pt", ".tmp")))


def test_every_sample_is_in_the_store_as_the_files_mode_writes_it(gateway, server, store, eagle3, tmp_path):
    tasks = prompts(6, "t")
    refs = adapter_for(gateway, store, eagle3).produce_refs(tasks, capture=eagle3[2])
    assert all(isinstance(ref, SampleRef) for ref in refs), refs
    for n, (ref, prompt) in enumerate(zip(refs, tasks)):
        assert ref.sample_id == f"{RUN}:{prompt.task_id}" and ref.metadata["generation"] == 1
        got, _handle = store.get(ref)
        ids, mask = prompt.payload["input_ids"], prompt.payload["loss_mask"]
        files = files_mode_ckpt(server, tmp_path / str(n), f"f{n}", ids, mask)
        # aux = the capture layers concatenated, target = the post-norm final state: bit for bit
        for feature, key in (("hidden_state", "aux_hidden_state"), ("target", "hidden_state")):
            assert got[feature].dtype == files[key].dtype == torch.bfloat16
            assert got[feature].shape == files[key].shape == (1, len(ids), HIDDEN * (3 if key.startswith("aux") else 1))
            assert torch.equal(got[feature].view(torch.int16), files[key].view(torch.int16)), (n, feature)
        assert torch.equal(got["input_ids"], torch.tensor([ids])) and torch.equal(files["input_ids"], torch.tensor(ids))
        assert torch.equal(got["loss_mask"], torch.tensor([mask]))
        assert torch.equal(got["attention_mask"], torch.ones(1, len(ids), dtype=torch.int64))
    assert dumps_left(gateway) == []
    status, body = get_json(gateway["url"] + "/status")
    assert status == 200 and body["prompts_served"] >= 6 and body["bytes_put"] > 0
    assert body["aux_layer_ids"] == LAYER_IDS


def test_a_retry_replaces_the_earlier_keys(gateway, store, eagle3):
    adapter = adapter_for(gateway, store, eagle3)
    first = task("retry", [7, 8, 9, 10])
    [ref] = adapter.produce_refs([first], capture=eagle3[2])
    assert isinstance(ref, SampleRef)
    # the same sample again without replace: the keys exist; that row fails, retryable
    [again] = adapter.produce_refs([first], capture=eagle3[2])
    assert isinstance(again, ServerCaptureFailure) and again.retryable and "already exists" in again.reason
    # a retry (attempt 1: replace) of the same sample, now a different prompt: its keys are replaced
    [replaced] = adapter.produce_refs([task("retry", [11, 12, 13, 14, 15], attempt=1)], capture=eagle3[2])
    assert isinstance(replaced, SampleRef), replaced
    got, _handle = store.get(replaced)
    assert got["input_ids"].tolist() == [[11, 12, 13, 14, 15]] and got["target"].shape == (1, 5, HIDDEN)
    assert dumps_left(gateway) == []


@pytest.mark.parametrize("damage", [
    ("sample_id", "has/slash"), ("gen", 0), ("store_id", ""),
    ("passthrough_dtype", "float32"), ("passthrough_shape", [1, 99]), ("passthrough_data", [1]),
])
def test_a_bad_spec_capture_entry_fails_only_its_row(gateway, store, eagle3, damage):
    def post(url, json_body, timeout):
        entry = json_body["spec_capture"][1]
        what, value = damage
        if what.startswith("passthrough_"):
            entry["passthrough"][0][what[len("passthrough_"):]] = value
        else:
            entry[what] = value
        return server_capture._default_post(url, json_body=json_body, timeout=timeout)  # pylint: disable=protected-access

    tasks = prompts(3, f"bad-{damage[0]}-")
    refs = adapter_for(gateway, store, eagle3, post_fn=post).produce_refs(tasks, capture=eagle3[2])
    assert isinstance(refs[0], SampleRef) and isinstance(refs[2], SampleRef), refs
    assert isinstance(refs[1], ServerCaptureFailure) and refs[1].reason.startswith("server_capture:spec_capture")
    for ref in (refs[0], refs[2]):
        store.get(ref)
    assert dumps_left(gateway) == []


def test_health_and_a_body_that_is_not_the_contract(gateway):
    assert get_json(gateway["url"] + "/health")[0] == 200
    with pytest.raises(Exception, match="400"):
        server_capture._default_post(gateway["url"] + "/generate",  # pylint: disable=protected-access
                                     json_body={"input_ids": [[1, 2]]}, timeout=10)


def test_sigterm_finishes_the_prompts_in_flight_then_exits(gateway, store, eagle3):
    import concurrent.futures  # pylint: disable=import-outside-toplevel
    tasks = prompts(4, "term")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(adapter_for(gateway, store, eagle3).produce_refs, tasks, capture=eagle3[2])
        for _try in range(200):   # the request is in: its prompts are at the server
            if get_json(gateway["url"] + "/status")[1]["prompts_in_flight"]:
                break
            asyncio.run(asyncio.sleep(0.01))
        gateway["proc"].terminate()
        refs = pending.result(60)
    assert all(isinstance(ref, SampleRef) for ref in refs), refs
    for ref in refs:
        store.get(ref)
    assert gateway["proc"].wait(60) == 0
    assert dumps_left(gateway) == []
