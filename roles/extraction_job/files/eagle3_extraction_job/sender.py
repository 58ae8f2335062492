# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Requests to the local SGLang server through aiohttp (sglang's own venv has it).

One ``POST /generate`` per sample with the token ids, rid ``<job>-<sample id>`` and
``max_new_tokens: 1``: the prefill is what the capture dumps. The server's answer
is not an acknowledgement; the dump file is (see :mod:`eagle3_extraction_job.job`).
"""
import asyncio

from eagle3_extraction_job import names

RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}


class RetryableError(RuntimeError):
    """Worth trying again later: connection refused, timeout, 5xx, 429."""


class SampleError(RuntimeError):
    """The server refused this sample (4xx): sending it again will not help."""


class FatalError(RuntimeError):
    """No request can succeed (401/403: the API key): the job stops."""


def backoff(attempt, initial, maximum):
    """Seconds before try ``attempt`` + 1 (1-based): doubling, capped."""
    return min(maximum, initial * 2 ** max(0, attempt - 1))


def _aiohttp():
    # imported when a request is made: the drain alone (benchmarks, tests) needs only torch
    import aiohttp  # pylint: disable=import-outside-toplevel
    return aiohttp


class Sender:
    def __init__(self, session, server_url, job, api_key="", request_timeout=600.0):
        aiohttp = _aiohttp()
        self.session = session
        self.url = server_url.rstrip("/")
        self.job = job
        self.timeout = aiohttp.ClientTimeout(total=request_timeout)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    @staticmethod
    def body(job, sample):
        return {
            "input_ids": sample.input_ids.tolist(),
            "rid": names.rid_for(job, sample.sample_id),
            "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
        }

    async def healthy(self):
        aiohttp = _aiohttp()
        try:
            async with self.session.get(f"{self.url}/health", timeout=aiohttp.ClientTimeout(
                    total=30)) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return False

    async def generate(self, sample):
        aiohttp = _aiohttp()
        try:
            async with self.session.post(f"{self.url}/generate", json=self.body(self.job, sample),
                                         headers=self.headers, timeout=self.timeout) as resp:
                text = await resp.text()
                status = resp.status
        except asyncio.TimeoutError as exc:
            raise RetryableError("timed out") from exc
        except aiohttp.ClientError as exc:
            raise RetryableError(f"{type(exc).__name__}: {exc}") from exc
        if status == 200:
            return
        detail = f"HTTP {status}: {text[:200]}"
        if status in (401, 403):
            raise FatalError(f"the server refused the API key ({detail})")
        if status in RETRY_STATUSES:
            raise RetryableError(detail)
        raise SampleError(detail)
