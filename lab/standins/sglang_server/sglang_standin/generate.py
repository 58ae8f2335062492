"""POST /generate of the stand-in server: a prefill whose hidden states go through the
real capture module, so that the files in the dump dir are the files a GPU server writes.

The capture is the one the sglang_patch role deploys next to sglang's modules
(``<venv>/.../sglang/srt/eagle3_hs_capture.py``). It is loaded from that file, as
deployed, without importing sglang (the fleet's sglang refuses to be imported):
:func:`eagle3_hs_capture.install` gets a model object with DeepseekV2ForCausalLM's
surface and :meth:`on_forward` gets each batch as sglang 0.5.23's ForwardBatch names
it. Nothing is captured when SGLANG_HS_DUMP_DIR is unset or the capture is not
deployed (molecule's sglang_server scenario): /generate then only answers.

The "model" computes hidden states from the token ids and their positions only
(:func:`hidden_states`), exactly representable in bf16, so a test can compute what
every file must hold. Requests that arrive together are batched into one EXTEND pass,
as sglang's scheduler does; like sglang, an exception in the forward ends the server.

``return_hidden_states: true`` is answered as SGLang answers it when started with
``--enable-return-hidden-states`` (``meta_info.hidden_states[0]``: one row a token, the aux
layers while the capture is on, else the final hidden state); without the flag, SGLang's 400.

Settings, from the environment:
  SGLANG_STANDIN_NUM_LAYERS   the model's layer count (default: config.json's
                              num_hidden_layers); the captured layers must fit in it
  SGLANG_STANDIN_MAX_BATCH    requests in one pass at most (default 32)
  SGLANG_STANDIN_FORWARD_MS   extra milliseconds a pass takes (default 0)
  SGLANG_STANDIN_HANG_AFTER   answer this many requests, then take every later one and never
                              answer it (a wedged server whose /health still says 200); unset:
                              answer all
  SGLANG_STANDIN_RETURN_OTHER 1: return_hidden_states answers other values than the capture
                              dumps (one value of the second layer off by 1): a wrong capture
  SGLANG_STANDIN_DUMP_VALUES  zeros or constant: the hidden states of every pass (dumped and
                              returned) all zero, or all 0.5: a capture that trains nothing

Only the standard library is imported here; torch when a capture is set up.
"""

import importlib.util
import json
import os
import queue
import socket
import socketserver
import threading
import time
import types
import uuid
from http.server import ThreadingHTTPServer

from sglang_standin import metrics

CAPTURE_MODULE = 'eagle3_hs_capture.py'
MAX_TOKEN_ID = 1 << 31
# sglang's default when a request gives no max_new_tokens
DEFAULT_MAX_NEW_TOKENS = 128
ANSWER_TIMEOUT_S = 600.0
RETURN_HIDDEN_STATES_FLAG = '--enable-return-hidden-states'
# tokenizer_manager's words when a request asks for hidden states the server was not started to return
NOT_ENABLED = ('The server is not configured to return the hidden states. Please set '
               '`--enable-return-hidden-states` to enable this feature.')
DUMP_VALUES = {'zeros': 0.0, 'constant': 0.5}


class Server(ThreadingHTTPServer):
    """The HTTP server: a listen backlog like uvicorn's (2048), not socketserver's 5, so that
    a job's concurrent requests are queued rather than reset. An IPv6 host (``::`` among them)
    is an IPv6-only socket, as uvicorn's (asyncio's create_server sets IPV6_V6ONLY): a server
    on ``::`` refuses 127.0.0.1."""
    request_queue_size = 2048
    daemon_threads = True

    def __init__(self, address, handler):
        if ':' in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        # HTTPServer's own would look the bind address up (getfqdn): the fleet has no DNS
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def capture_path():
    """Where sglang_patch deploys the capture: sglang's package dir + srt/ (find_spec
    of a top-level package does not import it)."""
    spec = importlib.util.find_spec('sglang')
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), 'srt', CAPTURE_MODULE)
    return path if os.path.isfile(path) else None


def load_capture(path):
    spec = importlib.util.spec_from_file_location('eagle3_hs_capture', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hidden_states(torch, input_ids, hidden_size, num_aux, positions=None):
    """(hidden [T, H], aux [T, K*H]) in bf16 for the ids at their positions.

    Every value is k/64 with |k| <= 127: exact in bf16, so the files can be compared
    bit for bit with what a test computes here.
    """
    ids = torch.as_tensor(input_ids, dtype=torch.int64).reshape(-1, 1)
    pos = (torch.arange(ids.shape[0], dtype=torch.int64) if positions is None
           else torch.as_tensor(positions, dtype=torch.int64)).reshape(-1, 1)
    base = (ids % 1000003) * 31 + pos * 7 + torch.arange(hidden_size, dtype=torch.int64).reshape(1, -1) * 3

    def layer(offset):
        return (((base + offset) % 255 - 127).to(torch.float32) / 64).to(torch.bfloat16)
    return layer(0), torch.cat([layer(11 * (k + 1)) for k in range(num_aux)], dim=1)


class _ForwardMode:  # what the capture reads of sglang's ForwardMode: its name
    name = 'EXTEND'


class _Model:
    """DeepseekV2ForCausalLM's surface that the capture's install() uses."""

    def __init__(self, num_hidden_layers, hidden_size):
        self.config = types.SimpleNamespace(num_hidden_layers=num_hidden_layers, hidden_size=hidden_size)
        self.model = types.SimpleNamespace(layers_to_capture=[])
        self.pp_group = types.SimpleNamespace(is_last_rank=True)
        self.capture_aux_hidden_states = False

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        """sglang 0.5.23's rule (deepseek_v2.py): +1 to every id when the first is 1."""
        self.capture_aux_hidden_states = True
        if layer_ids is None:
            n = self.config.num_hidden_layers
            self.model.layers_to_capture = [2, n // 2, n - 3]
        elif layer_ids and layer_ids[0] == 1:
            self.model.layers_to_capture = [val + 1 for val in layer_ids]
        else:
            self.model.layers_to_capture = list(layer_ids)


class _Request:
    def __init__(self, rid, input_ids, max_new_tokens, return_hidden_states=False):
        self.rid = rid
        self.input_ids = input_ids
        self.max_new_tokens = max_new_tokens
        self.return_hidden_states = return_hidden_states
        self.hidden_states = None
        self.done = threading.Event()
        self.error = None


class Engine:
    """The scheduler: one thread runs passes over the requests that wait."""

    def __init__(self, model_path, environ, log, return_hidden_states=False, metrics=None):
        self.log = log
        # what GET /metrics reads (metrics.py): None without --enable-metrics
        self.metrics = metrics
        self.return_hidden_states = return_hidden_states
        self.return_other = environ.get('SGLANG_STANDIN_RETURN_OTHER') == '1'
        self.dump_values = DUMP_VALUES.get(environ.get('SGLANG_STANDIN_DUMP_VALUES', ''))
        with open(os.path.join(model_path, 'config.json')) as f:
            config = json.load(f)
        self.hidden_size = int(config.get('hidden_size') or 64)
        layers = environ.get('SGLANG_STANDIN_NUM_LAYERS') or config.get('num_hidden_layers') or 61
        self.max_batch = int(environ.get('SGLANG_STANDIN_MAX_BATCH', '32'))
        self.forward_s = float(environ.get('SGLANG_STANDIN_FORWARD_MS', '0')) / 1000.0
        hang_after = environ.get('SGLANG_STANDIN_HANG_AFTER', '')
        self.hang_after = int(hang_after) if hang_after else None
        self.taken = 0
        self.taken_lock = threading.Lock()
        self.never = threading.Event()
        self.queue = queue.Queue()
        self.torch = None
        self.capture = None
        self.num_aux = 0
        path = capture_path()
        if not environ.get('SGLANG_HS_DUMP_DIR'):
            log('generate: SGLANG_HS_DUMP_DIR is unset: nothing is captured')
        elif path is None:
            log('generate: no capture module deployed next to sglang: nothing is captured')
        else:
            import torch  # pylint: disable=import-outside-toplevel
            self.torch = torch
            module = load_capture(path)
            model = _Model(int(layers), self.hidden_size)
            # tp rank 0, no sglang server args: the settings a single-GPU sglang has
            self.capture = module.install(model, tp_rank=0, environ=environ, parallel={})
            if self.capture is not None:
                self.num_aux = len(model.model.layers_to_capture)
                log('generate: capturing into %s through %s (hidden size %d, layers %s)'
                    % (environ['SGLANG_HS_DUMP_DIR'], path, self.hidden_size, model.model.layers_to_capture))
        threading.Thread(target=self._loop, name='standin-scheduler', daemon=True).start()

    def submit(self, rid, input_ids, max_new_tokens, return_hidden_states=False):
        """(output ids, hidden state rows or None) once the request's pass ran."""
        with self.taken_lock:
            self.taken += 1
            wedged = self.hang_after is not None and self.taken > self.hang_after
        if wedged:
            self.log('generate: wedged (SGLANG_STANDIN_HANG_AFTER=%d): %s is never answered' % (self.hang_after, rid))
            self.never.wait()
        request = _Request(rid, input_ids, max_new_tokens, return_hidden_states)
        self.queue.put(request)
        if not request.done.wait(ANSWER_TIMEOUT_S):
            raise TimeoutError('the forward did not run within %d s' % ANSWER_TIMEOUT_S)
        if request.error is not None:
            raise RuntimeError(request.error)
        if self.metrics is not None:
            self.metrics.answered(len(request.input_ids), request.max_new_tokens)
        return [(sum(request.input_ids) + k) % 50000 for k in range(request.max_new_tokens)], request.hidden_states

    def _loop(self):
        while True:
            batch = [self.queue.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            if self.metrics is not None:
                self.metrics.pass_began(len(batch), sum(len(r.input_ids) for r in batch), self.queue.qsize())
            try:
                self._forward(batch)
            except Exception as exc:  # pylint: disable=broad-except
                # sglang: an exception in the model's forward ends the scheduler, and the server
                self.log('Scheduler hit an exception: %r' % (exc,))
                for request in batch:
                    request.error = repr(exc)
                    request.done.set()
                time.sleep(0.2)
                os._exit(1)  # pylint: disable=protected-access
            if self.metrics is not None:
                self.metrics.pass_ended(self.queue.qsize())
            for request in batch:
                request.done.set()

    def _forward(self, batch):
        if self.forward_s:
            time.sleep(self.forward_s)
        returning = [r for r in batch if r.return_hidden_states]
        if self.capture is None and not returning:
            return
        if self.torch is None:
            import torch  # pylint: disable=import-outside-toplevel
            self.torch = torch
        torch = self.torch
        ids = [i for r in batch for i in r.input_ids]
        positions = [p for r in batch for p in range(len(r.input_ids))]
        hidden, aux = hidden_states(torch, ids, self.hidden_size, self.num_aux, positions)
        if self.dump_values is not None:
            hidden, aux = torch.full_like(hidden, self.dump_values), torch.full_like(aux, self.dump_values)
        lens = [len(r.input_ids) for r in batch]
        self._answer_hidden_states(batch, hidden if self.capture is None else aux)
        if self.capture is None:
            return
        forward_batch = types.SimpleNamespace(
            forward_mode=_ForwardMode(), batch_size=len(batch), rids=[r.rid for r in batch],
            input_ids=torch.tensor(ids, dtype=torch.int64),
            extend_seq_lens=torch.tensor(lens, dtype=torch.int32), extend_seq_lens_cpu=lens,
            extend_prefix_lens=torch.zeros(len(batch), dtype=torch.int32),
            extend_prefix_lens_cpu=[0] * len(batch),
            orig_seq_lens=torch.tensor(lens, dtype=torch.int32))
        self.capture.on_forward(forward_batch, forward_batch.input_ids, hidden, aux)

    def _answer_hidden_states(self, batch, states):
        """Each request that asked: its rows of the pass (SGLang: the aux layers while the capture
        is on, else the final hidden state), as floats."""
        start = 0
        for request in batch:
            end = start + len(request.input_ids)
            if request.return_hidden_states:
                rows = states[start:end].float()
                if self.return_other:
                    rows = rows.clone()
                    rows[0, min(self.hidden_size, rows.shape[1] - 1)] += 1.0
                request.hidden_states = [rows.tolist()]
            start = end


def parse_request(body):
    """(rid, input_ids, max_new_tokens) of a /generate body, or raise ValueError."""
    if not isinstance(body, dict):
        raise ValueError('expected a JSON object')
    ids = body.get('input_ids')
    if body.get('text') is not None and ids is None:
        raise ValueError('the stand-in takes input_ids, not text')
    if not isinstance(ids, list) or not ids or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_TOKEN_ID for i in ids):
        raise ValueError('input_ids: expected a non-empty list of token ids')
    rid = body.get('rid')
    if rid is None:
        rid = uuid.uuid4().hex  # what sglang gives a request without a rid
    elif not isinstance(rid, str) or not rid:
        raise ValueError('rid: expected a string')
    params = body.get('sampling_params') or {}
    max_new = params.get('max_new_tokens', DEFAULT_MAX_NEW_TOKENS) if isinstance(params, dict) else None
    if not isinstance(max_new, int) or isinstance(max_new, bool) or not 0 <= max_new <= 1 << 20:
        raise ValueError('sampling_params.max_new_tokens: expected an integer >= 0')
    return rid, ids, max_new


def wants_hidden_states(body):
    """``return_hidden_states`` of a /generate body (SGLang takes a bool), or raise ValueError."""
    value = body.get('return_hidden_states', False)
    if not isinstance(value, bool):
        raise ValueError('return_hidden_states: expected true or false')
    return value


def handle_post(handler, state):
    """The HTTP handler's do_POST: /generate (the API key as the other endpoints want it)."""
    path = handler.path.split('?', 1)[0]
    key = state['api_key']
    if key and handler.headers.get('Authorization') != 'Bearer ' + key:
        handler.answer(401, {'error': 'Unauthorized'})
        return
    if path != '/generate':
        handler.answer(404, {'detail': 'Not Found'})
        return
    engine = state.get('engine')
    if not state['ready'] or engine is None:
        handler.answer(503, {'error': 'the server is not ready'})
        return
    try:
        length = int(handler.headers.get('Content-Length') or 0)
        body = json.loads(handler.rfile.read(length) or b'null')
        rid, ids, max_new = parse_request(body)
        want_hidden = wants_hidden_states(body)
    except ValueError as exc:
        handler.answer(400, {'error': {'message': str(exc)}})
        return
    if want_hidden and not engine.return_hidden_states:
        handler.answer(400, {'error': {'message': NOT_ENABLED}})
        return
    try:
        output_ids, hidden = engine.submit(rid, ids, max_new, want_hidden)
    except (RuntimeError, TimeoutError) as exc:
        handler.answer(500, {'error': {'message': str(exc)}})
        return
    meta = {'id': rid, 'prompt_tokens': len(ids), 'completion_tokens': len(output_ids), 'cached_tokens': 0,
            'finish_reason': {'type': 'length', 'length': len(output_ids)}}
    if hidden is not None:
        meta['hidden_states'] = hidden
    handler.answer(200, {'text': '', 'output_ids': output_ids, 'meta_info': meta})


def setup(state, model_path, log):
    """Start the scheduler (and the capture) from the main thread: the capture's SIGTERM
    handler can only be set there, and it chains to the handler already set."""
    argv = state.get('server_info', {}).get('argv', [])
    state['metrics'] = metrics.Metrics(metrics.model_name(argv, model_path)) if metrics.enabled(argv) else None
    state['engine'] = Engine(model_path, os.environ, log, return_hidden_states=RETURN_HIDDEN_STATES_FLAG in argv,
                             metrics=state['metrics'])
