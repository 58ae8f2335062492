"""GET /metrics of the stand-in server: Prometheus text as SGLang serves it when started with
``--enable-metrics`` (without the flag SGLang mounts no /metrics: 404). Like SGLang, /metrics
wants no API key (its auth middleware lets /health and /metrics through, for scrapers).

A few of SGLang 0.5.x's real series (sglang/srt/metrics/collector.py), each with SGLang's
``model_name`` label (``--served-model-name``, else the model path): the scheduler's gauges
``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:num_used_tokens``,
``sglang:token_usage``, ``sglang:gen_throughput`` and the tokenizer manager's counters
``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``, ``sglang:num_requests_total``.
The values are the stand-in's own: requests in the pass under way and waiting, prompt and
generated tokens of the requests answered.
"""

import threading
import time

FLAG = '--enable-metrics'
CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
# the stand-in's KV pool, for token_usage (a number of tokens; SGLang's is the GPU's)
MAX_TOTAL_NUM_TOKENS = 1 << 20

GAUGES = (
    ('num_running_reqs', 'The number of running requests.'),
    ('num_queue_reqs', 'The number of requests in the waiting queue.'),
    ('num_used_tokens', 'The number of used tokens.'),
    ('token_usage', 'The token usage.'),
    ('gen_throughput', 'The generation throughput (token/s).'),
)
COUNTERS = (
    ('prompt_tokens_total', 'Number of prefill tokens processed.'),
    ('generation_tokens_total', 'Number of generation tokens processed.'),
    ('num_requests_total', 'Number of requests processed.'),
)


def enabled(argv):
    return FLAG in argv


def model_name(argv, model_path):
    """SGLang's model_name label: --served-model-name (as typed or from --config), else the model path."""
    for index, word in enumerate(argv):
        if word == '--served-model-name' and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith('--served-model-name='):
            return word.split('=', 1)[1]
    return model_path


def escape(value):
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


class Metrics:
    """What the engine counts, read by GET /metrics (any thread)."""

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.values = dict.fromkeys([n for n, _h in GAUGES + COUNTERS], 0.0)

    def pass_began(self, running, tokens, waiting):
        with self.lock:
            self.values.update(num_running_reqs=float(running), num_used_tokens=float(tokens),
                               token_usage=round(tokens / MAX_TOTAL_NUM_TOKENS, 2), num_queue_reqs=float(waiting))

    def pass_ended(self, waiting):
        with self.lock:
            self.values.update(num_running_reqs=0.0, num_used_tokens=0.0, token_usage=0.0,
                               num_queue_reqs=float(waiting))

    def answered(self, prompt_tokens, generated_tokens):
        with self.lock:
            values = self.values
            values['prompt_tokens_total'] += prompt_tokens
            values['generation_tokens_total'] += generated_tokens
            values['num_requests_total'] += 1
            values['gen_throughput'] = values['generation_tokens_total'] / max(1e-9, time.monotonic() - self.started)

    def text(self):
        with self.lock:
            values = dict(self.values)
        label = '{model_name="%s"}' % escape(self.name)
        lines = []
        for kind, series in (('gauge', GAUGES), ('counter', COUNTERS)):
            for name, help_text in series:
                # a counter's HELP and TYPE name it with _total, as SGLang's production_metrics.md shows
                lines += ['# HELP sglang:%s %s' % (name, help_text), '# TYPE sglang:%s %s' % (name, kind),
                          'sglang:%s%s %r' % (name, label, float(values[name]))]
        return '\n'.join(lines) + '\n'
