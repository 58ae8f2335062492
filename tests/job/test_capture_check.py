# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capture checked against the server's own return_hidden_states (capture_check.py), and a
degenerate dump rejected: against the in-process stand-in server on 127.0.0.1."""
import asyncio
import json
import os
import types

import pytest

from job_helpers import HIDDEN, StandinServer, config_for, make_samples, torch, write_dataset
from standin_process import standin_server
from eagle3_extraction_job import capture_check
from eagle3_extraction_job import job as jobmod


def run_job(job_dirs, samples, setup=None, server_cls=StandinServer, **cfg_over):
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def body():
        server = await server_cls(job_dirs["dump"]).start()
        try:
            if setup:
                setup(server)
            job = jobmod.Job(config_for(job_dirs, ds, server.url, **cfg_over), torch)
            code = await asyncio.wait_for(job.run_async(), 60)
            return code, server
        finally:
            await server.stop()
    code, server = asyncio.run(body())
    with open(os.path.join(job_dirs["out"], "status.json"), encoding="utf-8") as f:
        return code, server, json.load(f)


def ckpts(out):
    return [n for _r, _d, names in os.walk(out) for n in names if n.endswith((".ckpt", ".tmp"))]


def rejected(out):
    folder = os.path.join(out, "rejected")
    found = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".reason"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                found[name[:-len(".reason")]] = f.read().strip()
    return found


def test_the_check_passes_before_the_first_sample_and_leaves_nothing(job_dirs):
    samples = make_samples(6)
    code, server, status = run_job(job_dirs, samples)
    assert code == jobmod.EXIT_COMPLETE and status["state"] == "complete"
    assert len(server.checks) == 1 and server.checks[0].startswith("testjob-.capture-check.")
    check = status["capture_check"]
    assert check["result"] == "passed" and check["checks"] == 1 and check["reason"] == "the job's start"
    assert os.listdir(job_dirs["dump"]) == [] and rejected(job_dirs["out"]) == {}
    assert len(ckpts(job_dirs["out"])) == 6


def test_a_mismatch_stops_the_shard_before_any_sample_and_writes_nothing(job_dirs):
    code, server, status = run_job(job_dirs, make_samples(6), lambda s: setattr(s, "return_other", True))
    assert code == jobmod.EXIT_REFUSED and status["state"] == "capture_mismatch"
    check = status["capture_check"]
    assert check["result"] == "capture_mismatch" and check["max_abs_diff"] == 1.0
    assert check["layer"] == 2 and check["captured_layer"] == 3 and check["values_differing"] == 1
    assert "max abs diff 1 at layer 2 of 3 (captured layer 3)" in status["last_errors"][-1]
    assert server.received == [] and ckpts(job_dirs["out"]) == [] and status["samples_done"] == 0
    kept = rejected(job_dirs["out"])   # the check's dump, kept with the reason
    assert len(kept) == 1 and next(iter(kept.values())).startswith("capture_mismatch: ")


def test_a_server_without_the_flag_says_so(job_dirs):
    code, server, status = run_job(job_dirs, make_samples(3),
                                   lambda s: setattr(s, "hidden_states_enabled", False))
    assert code == jobmod.EXIT_REFUSED and status["state"] == "capture_check_unavailable"
    assert "--enable-return-hidden-states" in status["last_errors"][-1]
    assert "extraction_job_capture_check" in status["last_errors"][-1]
    assert server.received == [] and ckpts(job_dirs["out"]) == []


def test_the_check_can_be_turned_off(job_dirs):
    code, server, status = run_job(job_dirs, make_samples(3), lambda s: setattr(s, "return_other", True),
                                   capture_check=False)
    assert code == jobmod.EXIT_COMPLETE and server.checks == []
    assert status["capture_check"] == {"enabled": False, "checks": 0}


class RestartingServer(StandinServer):
    """After its 4th sample, the server 'restarts' (one 503) and comes back returning other values."""

    async def generate(self, request):
        if len(self.received) == 4 and not self.return_other:
            self.return_other = True
            from aiohttp import web  # pylint: disable=import-outside-toplevel
            return web.json_response({"error": "restarting"}, status=503)
        return await super().generate(request)


def test_the_check_runs_again_when_the_server_comes_back_and_stops_the_shard(job_dirs):
    code, server, status = run_job(job_dirs, make_samples(30, length=lambda n: 5), server_cls=RestartingServer,
                                   concurrency=1)
    assert code == jobmod.EXIT_REFUSED and status["state"] == "capture_mismatch"
    assert len(server.checks) == 2 and status["capture_check"]["checks"] == 2
    assert "failed a request" in status["capture_check"]["reason"]
    # nothing was sent after the restart; what the server dumped before it is durable or left in the
    # dump dir for the next start's drain, never lost
    assert len(server.received) == 4
    left = [n for n in os.listdir(job_dirs["dump"]) if n.endswith(".pt")]
    assert status["samples_done"] == len(ckpts(job_dirs["out"])) and status["samples_done"] + len(left) == 4


def test_a_new_capture_identity_makes_the_check_due(tmp_path):
    cfg = types.SimpleNamespace(capture_check=True, dump_dir=str(tmp_path))
    check = capture_check.ServerCheck(cfg, torch, None, [1, 2, 3])
    client = types.SimpleNamespace(troubles=0)
    stats = tmp_path / capture_check.STATS_FILE
    stats.write_text(json.dumps({"pid": 10, "started": "t0"}))
    check.due, check.identity = "", capture_check.capture_identity(str(tmp_path))
    assert check._why_due(client) == ""   # pylint: disable=protected-access
    stats.write_text(json.dumps({"pid": 11, "started": "t1"}))
    check._polled = 0.0   # pylint: disable=protected-access
    assert "the capture restarted (pid 11" in check._why_due(client)   # pylint: disable=protected-access
    client.troubles = 1
    assert "failed a request" in check._why_due(client)   # pylint: disable=protected-access


def test_compare_is_bit_for_bit():
    aux = torch.zeros(1, 2, 3 * HIDDEN, dtype=torch.bfloat16)
    aux[0, :, :] = 0.25
    dump = {"aux_hidden_state": aux, "hidden_state": torch.zeros(1, 2, HIDDEN, dtype=torch.bfloat16),
            "captured_layers": [2, 30, 58]}
    rows = aux[0].float().tolist()
    assert capture_check.compare(torch, dump, rows) is None
    dump["aux_hidden_state"][0, 1, 2 * HIDDEN] = 0.0
    rows[1][2 * HIDDEN] = -0.0   # equal as numbers, not as bits
    message, details = capture_check.compare(torch, dump, rows)
    assert details["layer"] == 3 and details["captured_layer"] == 58 and details["max_abs_diff"] == 0.0
    assert "shape [2, 16]" in capture_check.compare(torch, dump, [r[:HIDDEN] for r in rows])[0]


def zeros(payload):
    payload["aux_hidden_state"] = torch.zeros_like(payload["aux_hidden_state"])


def test_a_degenerate_dump_is_rejected_with_its_reason(job_dirs):
    samples = make_samples(4)
    bad = f"testjob-{samples[2][0]}"
    code, _server, status = run_job(job_dirs, samples, lambda s: s.mutate.update({bad: zeros}))
    assert code == jobmod.EXIT_INCOMPLETE and status["samples_done"] == 3 and status["samples_failed"] == 1
    kept = rejected(job_dirs["out"])
    assert [k.split(".pt.")[0] for k in kept] == [bad]
    assert "degenerate aux_hidden_state: layer 1 of 3 (captured layer 2): all zero" in next(iter(kept.values()))


def test_a_server_dumping_zeros_fails_the_check(job_dirs):
    code, server, status = run_job(job_dirs, make_samples(3), lambda s: setattr(s, "dump_all", zeros))
    assert code == jobmod.EXIT_REFUSED and status["state"] == "capture_mismatch"
    assert "the capture check's dump is rejected: degenerate" in status["last_errors"][-1]
    assert server.received == [] and ckpts(job_dirs["out"]) == []


@pytest.mark.parametrize("env,flag,check,state", [
    ({}, True, True, "complete"),
    ({"SGLANG_STANDIN_RETURN_OTHER": "1"}, True, True, "capture_mismatch"),
    ({}, False, True, "capture_check_unavailable"),
    ({"SGLANG_STANDIN_DUMP_VALUES": "constant"}, False, False, "incomplete")])
def test_the_job_against_the_fleets_stand_in_process(tmp_path, env, flag, check, state):
    """The fleet's stand-in server as a process (the capture module as sglang_patch deploys it): the check
    passes on it, stops the shard when it returns other values than it dumps, says when the server lacks
    the flag; a capture dumping one value has every sample rejected, named degenerate."""
    samples = make_samples(3)
    ds = write_dataset(tmp_path / "d.jsonl", samples)
    out = str(tmp_path / "out" / "host1")
    args = ["--enable-return-hidden-states"] if flag else []
    with standin_server(tmp_path, "k", env=env, args=args) as running:
        dirs = {"dump": str(running["dump"]), "out": out, "root": tmp_path}
        job = jobmod.Job(config_for(dirs, ds, running["url"], hidden_size=64, capture_check=check), torch,
                         api_key="k")
        code = asyncio.run(asyncio.wait_for(job.run_async(), 90))
    with open(os.path.join(out, "status.json"), encoding="utf-8") as f:
        status = json.load(f)
    assert status["state"] == state, status["last_errors"]
    if state == "complete":
        assert code == jobmod.EXIT_COMPLETE and status["capture_check"]["result"] == "passed"
        assert len(ckpts(out)) == 3
    elif state == "incomplete":
        assert status["samples_failed"] == 3 and ckpts(out) == []
        assert all("degenerate hidden_state: every value is 0.5" in why for why in rejected(out).values())
    else:
        assert code == jobmod.EXIT_REFUSED and ckpts(out) == [] and status["samples_done"] == 0


def test_a_server_whose_capture_is_off_fails_at_once(job_dirs):
    """It returns its final hidden state (one layer wide) and dumps nothing: no wait for a dump."""
    def final_only(server):
        def one_layer(body):
            from aiohttp import web  # pylint: disable=import-outside-toplevel
            server.checks.append(body["rid"])
            rows = [[0.5] * HIDDEN for _token in body["input_ids"]]
            return web.json_response({"meta_info": {"id": body["rid"], "hidden_states": [rows]}})
        server.hidden_states_answer = one_layer
    # a wait for the dump would outlast the test's deadline
    code, server, status = run_job(job_dirs, make_samples(3), final_only, ack_timeout=600.0)
    assert code == jobmod.EXIT_REFUSED and status["state"] == "capture_mismatch"
    assert status["capture_check"]["returned_shape"] == [3, HIDDEN] and len(server.checks) == 1
    assert "expected [3, 48] (3 captured layers of 16): its capture is off" in status["last_errors"][-1]
