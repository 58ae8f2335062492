# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A server that does not answer (killed, being restarted by its unit) is waited for: the gateway sends the same
prompt again, under the same rid, until ``server_wait``, so the producer sees a slower answer instead of a failure
that spends one of the prompt's bounded attempts (SpecForge gives each 5; on the fleet, a server killed mid-run
made 12 prompts fail for good within a second before this). A dump of an earlier try is the answer too."""
import asyncio
import types

import pytest

from online_stack import JOB
from eagle3_extraction_job import gateway, gateway_config, names, sender


class FlakyServer:
    """A client whose server refuses ``down`` connections, then takes the prompt; its rids are recorded."""

    def __init__(self, down):
        self.down = down
        self.rids = []

    async def generate(self, sample):
        self.rids.append(names.rid_for(JOB, sample.sample_id))
        if len(self.rids) <= self.down:
            raise sender.RetryableError("Cannot connect to host 127.0.0.1:8000")


@pytest.fixture
def made(tmp_path):
    cfg = gateway_config.from_dict({
        "job": JOB, "server_url": "http://127.0.0.1:1", "dump_dir": str(tmp_path),
        "rejected_dir": str(tmp_path / "rejected"), "server_wait": 3.0,
        "mooncake": {"local_hostname": "127.0.0.1", "metadata_server": "http://127.0.0.1:2/metadata",
                     "master_server_address": "127.0.0.1:3"}})
    found = gateway.Gateway(cfg, types.SimpleNamespace(set_num_threads=lambda n: None),
                            writer=types.SimpleNamespace(ready=False))
    yield found
    found.pool.shutdown()


def send(made, client, dump_path="/nonexistent/dump.pt"):
    made.client = client
    sample = types.SimpleNamespace(sample_id="a" * 32, input_ids=[1, 2, 3])
    return asyncio.run(made._send(sample, dump_path))  # pylint: disable=protected-access


def test_a_restarting_server_is_waited_for_and_the_same_prompt_sent_again(made):
    client = FlakyServer(down=2)
    assert send(made, client) is None
    assert len(client.rids) == 3 and len(set(client.rids)) == 1     # one rid: one dump name
    assert made.counters["server_retries"] == 2


def test_a_server_down_past_server_wait_fails_the_row(made):
    client = FlakyServer(down=1000)
    failure = send(made, client)
    assert failure.startswith("sglang: Cannot connect") and "tried for up to 3 s" in failure
    assert 2 <= len(client.rids) <= 4


def test_a_dump_of_an_earlier_try_is_the_answer(made, tmp_path):
    dump = tmp_path / names.dump_name_for(JOB, "a" * 32)
    dump.write_bytes(b"x")
    client = FlakyServer(down=1000)
    assert send(made, client, str(dump)) is None
    assert len(client.rids) == 1
