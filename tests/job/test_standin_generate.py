# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's stand-in server (lab/standins/sglang_server) answers /generate and dumps
through the capture module as sglang_patch deploys it: run here on 127.0.0.1 with the
capture placed next to a package that refuses to be imported, as on the fleet."""
import json
import os
import sys
import time
import urllib.error
import urllib.request

import pytest

from job_helpers import torch
from standin_process import STANDIN, standin_server

sys.path.insert(0, STANDIN)

from sglang_standin import generate  # noqa: E402  pylint: disable=wrong-import-position

KEY = "standin-test-key"


def post(url, body, key=KEY):
    request = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": "Bearer " + key} if key else {})})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def server(tmp_path):
    """The stand-in with the capture deployed as sglang_patch does: <sglang>/srt/eagle3_hs_capture.py."""
    with standin_server(tmp_path, KEY) as running:
        yield running


def wait_for(path, timeout=20):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_generate_dumps_the_expected_tensors_through_the_capture(server):
    ids = [5, 17, 123456, 9, 9, 0]
    status, body = post(server["url"], {"input_ids": ids, "rid": "job-s1",
                                        "sampling_params": {"max_new_tokens": 3}})
    assert status == 200 and body["meta_info"]["id"] == "job-s1" and len(body["output_ids"]) == 3
    path = server["dump"] / "job-s1.pt"
    wait_for(path)
    dump = torch.load(path, weights_only=True)
    hidden, aux = generate.hidden_states(torch, ids, 64, 3)
    assert torch.equal(dump["input_ids"], torch.tensor(ids))
    assert torch.equal(dump["hidden_state"], hidden.unsqueeze(0))
    assert torch.equal(dump["aux_hidden_state"], aux.unsqueeze(0))
    assert dump["captured_layers"] == [2, 30, 58] and dump["hidden_state"].dtype == torch.bfloat16


def test_concurrent_requests_are_batched_and_each_dumped_once(server):
    import concurrent.futures  # pylint: disable=import-outside-toplevel
    samples = {f"job-b{n}": [n, n + 1, n * 7 % 50][: 1 + n % 3] for n in range(40)}
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda kv: post(server["url"], {"input_ids": kv[1], "rid": kv[0],
                                                                "sampling_params": {"max_new_tokens": 1}}),
                                samples.items()))
    assert all(answer[0] == 200 for answer in answers)
    for rid, ids in samples.items():
        wait_for(server["dump"] / f"{rid}.pt")
        hidden, _aux = generate.hidden_states(torch, ids, 64, 3)
        assert torch.equal(torch.load(server["dump"] / f"{rid}.pt", weights_only=True)["hidden_state"][0], hidden)


def test_key_ids_and_rid_rule(server):
    assert post(server["url"], {"input_ids": [1]}, key="wrong")[0] == 401
    assert post(server["url"], {"text": "hello"})[0] == 400
    assert post(server["url"], {"input_ids": [1, -2]})[0] == 400
    # no rid: sglang's uuid4().hex, which the capture never dumps
    assert post(server["url"], {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 1}})[0] == 200
    time.sleep(1.5)  # the capture writes its stats each second
    stats = json.loads((server["dump"] / "CAPTURE_STATS.json").read_text())
    assert sum(stats["skipped"].values()) == 1, stats
    assert not list(server["dump"].glob("*.pt"))


def test_sigterm_ends_the_server(server):
    server["proc"].terminate()
    assert server["proc"].wait(30) == 0


def hidden_request(server, ids, rid):
    return post(server["url"], {"input_ids": ids, "rid": rid, "return_hidden_states": True,
                                "sampling_params": {"max_new_tokens": 1}})


@pytest.mark.parametrize("env,equal", [({}, True), ({"SGLANG_STANDIN_RETURN_OTHER": "1"}, False)])
def test_return_hidden_states_answers_the_dumped_aux_layers_or_other_values(tmp_path, env, equal):
    """As SGLang with the capture on and --enable-return-hidden-states: the aux layers it dumps (the
    capture check's reference); SGLANG_STANDIN_RETURN_OTHER=1: other values, a wrong capture."""
    ids = [5, 17, 123456, 9]
    with standin_server(tmp_path, KEY, env=env, args=["--enable-return-hidden-states"]) as running:
        status, body = hidden_request(running, ids, "job-h1")
        assert status == 200
        wait_for(running["dump"] / "job-h1.pt")
        dump = torch.load(running["dump"] / "job-h1.pt", weights_only=True)
    returned = torch.tensor(body["meta_info"]["hidden_states"][0], dtype=torch.float32)
    assert returned.shape == dump["aux_hidden_state"][0].shape
    assert torch.equal(returned, dump["aux_hidden_state"][0].float()) is equal


def test_return_hidden_states_without_the_flag_is_sglangs_400(server):
    status, body = hidden_request(server, [1, 2], "job-h2")
    assert status == 400 and "--enable-return-hidden-states" in body["error"]["message"]


@pytest.mark.parametrize("mode,value", [("zeros", 0.0), ("constant", 0.5)])
def test_a_degenerate_capture_mode_dumps_one_value(tmp_path, mode, value):
    with standin_server(tmp_path, KEY, env={"SGLANG_STANDIN_DUMP_VALUES": mode}) as running:
        assert post(running["url"], {"input_ids": [3, 4, 5], "rid": "job-z1",
                                     "sampling_params": {"max_new_tokens": 1}})[0] == 200
        wait_for(running["dump"] / "job-z1.pt")
        dump = torch.load(running["dump"] / "job-z1.pt", weights_only=True)
    assert bool((dump["aux_hidden_state"] == value).all()) and bool((dump["hidden_state"] == value).all())
