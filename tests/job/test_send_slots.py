# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The send slots bound requests at the server, not files on their way to disk."""
import asyncio
import os
import time

from job_helpers import StandinServer, config_for, make_samples, torch, write_dataset
from eagle3_extraction_job import drain
from eagle3_extraction_job import job as jobmod


def test_the_server_gets_the_next_request_while_the_last_dump_is_drained(job_dirs, monkeypatch):
    # one slot and a slow output disk: if the slot were held until the file is durable,
    # the server would sit idle for every drain, and no request would ever arrive while
    # an earlier answer's dump still waits in the dump dir
    original = drain.Drainer.drain

    def slow_drain(self, dump_path, sample):
        time.sleep(0.3)
        return original(self, dump_path, sample)

    monkeypatch.setattr(drain.Drainer, "drain", slow_drain)
    samples = make_samples(6)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    class CountingServer(StandinServer):
        """Counts the dumps still waiting in the dump dir when a request arrives."""
        waiting_at_arrival = []

        async def generate(self, request):
            self.waiting_at_arrival.append(
                len([n for n in os.listdir(self.dump_dir) if n.endswith(".pt")]))
            return await super().generate(request)

    async def body():
        server = await CountingServer(job_dirs["dump"]).start()
        try:
            cfg = config_for(job_dirs, ds, server.url, concurrency=1, drain_workers=2)
            return await jobmod.Job(cfg, torch).run_async()
        finally:
            await server.stop()

    assert asyncio.run(body()) == jobmod.EXIT_COMPLETE
    assert len(CountingServer.waiting_at_arrival) == 6
    assert max(CountingServer.waiting_at_arrival) >= 1, CountingServer.waiting_at_arrival
