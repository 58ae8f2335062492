# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Requests to the local SGLang server through aiohttp (sglang's own venv has it).

One ``POST /generate`` per sample with the token ids, rid ``<job>-<sample id>`` and
``max_new_tokens: 1``: the prefill is what the capture dumps. The server's answer
is not an acknowledgement; the dump file is (see :mod:`eagle3_extraction_job.job`).
"""
import asyncio
import json
import re

from eagle3_extraction_job import names

RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}


class RetryableError(RuntimeError):
    """Worth trying again later: connection refused, timeout, 5xx, 429."""


class SampleError(RuntimeError):
    """The server refused this sample (4xx): sending it again will not help.

    SGLang answers 400 for a prompt longer than its context, for example: the sample is
    recorded as failed with this reason and the others go on."""


class AlreadySent(RuntimeError):
    """The server still holds an earlier copy of this request (its rid is registered).

    SGLang answers 400 "Duplicate request ID" when a retry reaches it before the first
    copy finished (a timed-out attempt that the server went on with): that copy's dump
    is the answer to wait for, as for a 200."""


# SGLang's words for a rid it still holds (tokenizer_manager: "Duplicate request ID ...")
DUPLICATE_RID = "duplicate request id"


class FatalError(RuntimeError):
    """No request can succeed (401/403: the API key): the job stops."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
DETAIL_CHARS = 200


def answer_detail(status, text, secrets=()):
    """What the log and status.json keep of an answer: one line, cut, no secret in it.

    A server's error body may echo what it was sent (a header, the key): each secret is
    replaced before the text is cut, so no part of one survives either."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "********")
    text = _CONTROL.sub(" ", text).strip()
    if len(text) > DETAIL_CHARS:
        text = text[:DETAIL_CHARS] + "..."
    return f"HTTP {status}: {text}"


def decoded(body, charset):
    """An answer's body as text: in its charset (else UTF-8), undecodable bytes replaced."""
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:   # a charset Python does not know
        return body.decode("utf-8", "replace")


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
        self.secrets = (api_key,) if api_key else ()
        # failures met (a retryable error, an unhealthy /health): the capture check runs again after one
        self.troubles = 0
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def idle(self):
        """Returns when no request of this sender is at the server."""
        await self._idle.wait()

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
                if resp.status != 200:
                    self.troubles += 1
                return resp.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError):
            self.troubles += 1
            return False

    async def generate(self, sample):
        await self._post(self.body(self.job, sample))

    async def generate_returning_hidden_states(self, rid, input_ids):
        """The answer (JSON) to one prompt sent with ``return_hidden_states: true``."""
        text = await self._post({"input_ids": list(input_ids), "rid": rid, "return_hidden_states": True,
                                 "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}})
        try:
            return json.loads(text)
        except ValueError as exc:
            raise RetryableError(f"an answer that is not JSON: {text[:DETAIL_CHARS]!r}") from exc

    async def _post(self, body):
        """POST /generate; the body's text for a 200, else the error its status says."""
        self.in_flight += 1
        self._idle.clear()
        try:
            return await self._post_counted(body)
        except RetryableError:
            self.troubles += 1
            raise
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()

    async def _post_counted(self, body):
        aiohttp = _aiohttp()
        try:
            async with self.session.post(f"{self.url}/generate", json=body,
                                         headers=self.headers, timeout=self.timeout) as resp:
                # an error body in no charset it claims (a proxy's binary page) is still an answer:
                # read as bytes and decoded leniently, never an exception that leaves the sample unrecorded
                text = decoded(await resp.read(), resp.charset)
                status = resp.status
        except asyncio.TimeoutError as exc:
            raise RetryableError("timed out") from exc
        except aiohttp.ClientError as exc:
            raise RetryableError(f"{type(exc).__name__}: {exc}") from exc
        if status == 200:
            return text
        detail = answer_detail(status, text, self.secrets)
        if status in (401, 403):
            raise FatalError(f"the server refused the API key ({detail})")
        if status in RETRY_STATUSES:
            raise RetryableError(detail)
        if status == 400 and DUPLICATE_RID in text.lower():
            raise AlreadySent(detail)
        raise SampleError(detail)
