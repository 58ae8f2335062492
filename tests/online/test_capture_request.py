# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's reading of SpecForge's request and of its own config: a bad body is refused
whole, a bad entry is that prompt's error, a bad setting names itself."""
import pytest

import online_stack  # noqa: F401  pylint: disable=unused-import  # this worktree's job package
from eagle3_extraction_job import capture_request, gateway_config
from eagle3_extraction_job.config import ConfigError


def entry(sample_id="run:t1", tokens=3, **over):
    value = {"store_id": "run", "sample_id": sample_id, "gen": 1, "replace": False,
             "features": {"aux": "hidden_state", "last_hidden": "target"},
             "passthrough": [{"name": "input_ids", "data": list(range(tokens)), "shape": [1, tokens],
                              "dtype": "int64"}]}
    value.update(over)
    return value


def test_a_good_request_gives_its_prompts_in_order():
    prompts = capture_request.parse_body({"input_ids": [[1, 2, 3], [4, 5]], "extra_key": ["a", "b"],
                                          "spec_capture": [entry(), entry("run:t2", 2)]}, 8)
    assert [p.error for p in prompts] == ["", ""]
    assert prompts[1].spec.key("target") == "run/run:t2/g1/target" and list(prompts[1].input_ids) == [4, 5]


@pytest.mark.parametrize("body", [None, [], {"input_ids": []}, {"input_ids": [[1]]},
                                  {"input_ids": [[1], [2]], "spec_capture": [entry(tokens=1)]},
                                  {"input_ids": [[1]] * 9, "spec_capture": [entry(tokens=1)] * 9}])
def test_a_body_that_is_not_the_contract_is_refused_whole(body):
    with pytest.raises(capture_request.BadRequest):
        capture_request.parse_body(body, 8)


@pytest.mark.parametrize("bad, why", [
    ({"sample_id": "a/b"}, "sample_id"), ({"sample_id": "a\nb"}, "sample_id"), ({"store_id": ""}, "store_id"),
    ({"gen": 0}, "gen"), ({"gen": True}, "gen"), ({"gen": "1"}, "gen"), ({"replace": 1}, "replace"),
    ({"features": {"logits": "x"}}, "features"), ({"features": {"aux": "a/b"}}, "features.aux"),
    ({"unknown": 1}, "unknown keys"), ({"features": {}, "passthrough": []}, "nothing to store"),
    ({"features": {"aux": "input_ids"}}, "given twice"),
    ({"passthrough": [{"name": "m", "data": [1, 2, 3], "shape": [1, 3], "dtype": "float32"}]}, "only int64"),
    ({"passthrough": [{"name": "m", "data": [1, 2, 3], "shape": [2, 3], "dtype": "int64"}]}, "shape"),
    ({"passthrough": [{"name": "m", "data": [1, 2, 3], "shape": [1, 4], "dtype": "int64"}]}, "shape"),
    ({"passthrough": [{"name": "m", "data": [1, 2], "shape": [1, 3], "dtype": "int64"}]}, "data"),
    ({"passthrough": [{"name": "m", "data": [1, 2, 1 << 63], "shape": [1, 3], "dtype": "int64"}]}, "data"),
    ({"passthrough": [{"name": "m", "data": [1, 2, 3], "shape": [1, 3]}]}, "exactly"),
])
def test_a_bad_entry_is_only_its_rows_error(bad, why):
    prompts = capture_request.parse_body({"input_ids": [[1, 2, 3], [1, 2, 3], [1, 2, 3]],
                                          "spec_capture": [entry("r:a"), entry(**{"sample_id": "r:b", **bad}), entry("r:c")]}, 8)
    assert prompts[0].error == prompts[2].error == ""
    assert why in prompts[1].error and prompts[1].spec is None


def test_bad_ids_and_a_sample_given_twice_are_row_errors():
    prompts = capture_request.parse_body({"input_ids": [[1, -2, 3], [1, 2, 3], [1, 2, 3]],
                                          "spec_capture": [entry("r:a"), entry("r:b"), entry("r:b")]}, 8)
    assert "input_ids" in prompts[0].error and prompts[1].error == "" and "twice" in prompts[2].error


def gateway_cfg(**over):
    raw = {"job": "gw", "server_url": "http://127.0.0.1:30000", "dump_dir": "/dev/shm/sglang_hs",
           "rejected_dir": "/var/lib/eagle3/rejected",
           "mooncake": {"local_hostname": "10.0.0.5", "metadata_server": "http://10.0.0.1:35880/metadata",
                        "master_server_address": "10.0.0.1:35551"}}
    raw.update(over)
    return gateway_config.from_dict(raw)


def test_the_config_defaults_and_its_bad_values():
    cfg = gateway_cfg()
    assert cfg.layer_ids == [1, 29, 57] and cfg.mooncake.protocol == "tcp"
    for over, named in [({"job": "a-b"}, "job="), ({"dump_dir": "relative"}, "dump_dir="),
                        ({"rejected_dir": "/dev/shm/sglang_hs"}, "rejected_dir="),
                        ({"layer_ids": [1, 1, 2]}, "layer_ids="), ({"listen_port": 0}, "listen_port="),
                        ({"ack_timeout": float("nan")}, "ack_timeout="), ({"api_key": "x"}, "unknown keys"),
                        ({"server_url": "http://h:1/x;rm"}, "server_url="),
                        ({"mooncake": {"local_hostname": "h", "metadata_server": "http://h:1/metadata",
                                       "master_server_address": "h:1", "protocol": "udp"}}, "mooncake.protocol=")]:
        with pytest.raises(ConfigError, match=named):
            gateway_cfg(**over)
