# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The send slots bound requests at the server, not files on their way to disk."""
import asyncio

from job_helpers import StandinServer, config_for, make_samples, slow_drains, torch, write_dataset
from eagle3_extraction_job import job as jobmod


def test_the_server_gets_the_next_request_while_the_last_dump_is_drained(job_dirs, monkeypatch):
    # one slot and a slow output disk: if the slot were held until the file is durable,
    # the server would sit idle for every drain, and no request would ever arrive while
    # an earlier answer's dump still waits in the dump dir
    slow_drains(monkeypatch, 0.3)
    samples = make_samples(6)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    server = StandinServer(job_dirs["dump"])

    async def body():
        await server.start()
        try:
            cfg = config_for(job_dirs, ds, server.url, concurrency=1, drain_workers=2)
            return await jobmod.Job(cfg, torch).run_async()
        finally:
            await server.stop()

    assert asyncio.run(body()) == jobmod.EXIT_COMPLETE
    assert len(server.waiting_at_arrival) == 6
    assert max(server.waiting_at_arrival) >= 1, server.waiting_at_arrival
