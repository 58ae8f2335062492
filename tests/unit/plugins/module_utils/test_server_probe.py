"""server_probe against a real HTTP server and a real log file."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest
from ansible_collections.eagle3.extraction.plugins.module_utils import server_probe


def serve(family, host, status_of):
    """A real HTTP server on ``host`` answering each GET with status_of(path); yields its base URL."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status_of(self.path))
            self.end_headers()

        def log_message(self, *args):
            pass

    class Server(http.server.HTTPServer):
        address_family = family
    try:
        server = Server((host, 0), Handler)
    except OSError:
        pytest.skip('no %s loopback here' % host)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield 'http://%s:%d' % ('[%s]' % host if ':' in host else host, server.server_address[1])
    server.shutdown()


@pytest.fixture
def http_server():
    yield from serve(socket.AF_INET, '127.0.0.1', lambda path: 200 if path == '/health' else 503)


@pytest.fixture
def http_server_v6():
    yield from serve(socket.AF_INET6, '::1', lambda path: 200 if path == '/health?full=1' else 404)


def test_health_reports_the_status_or_none(http_server):
    assert server_probe.health(http_server + '/health') == 200
    assert server_probe.health(http_server + '/starting') == 503
    assert server_probe.health('http://127.0.0.1:9/health', timeout=1) is None
    assert server_probe.health('not a url') is None
    assert server_probe.health('ftp://127.0.0.1/health') is None


def test_health_calls_an_ipv6_address_with_its_query(http_server_v6):
    assert server_probe.health(http_server_v6 + '/health?full=1') == 200
    assert server_probe.health(http_server_v6 + '/health') == 404


def test_health_does_not_import_ansibles_url_helpers():
    """The converged check imports this on every host of every run: open_url's imports cost more than the check."""
    assert not hasattr(server_probe, 'open_url')


def test_log_tail_reads_from_the_offset(tmp_path):
    log = tmp_path / 'log'
    log.write_text('a\nb\nc\n')
    assert server_probe.log_tail(str(log), 2) == ['b', 'c']
    assert server_probe.log_tail(str(log), 999) == ['a', 'b', 'c']  # the file shrank: all of it
    assert server_probe.log_tail(str(log), 0, count=1) == ['c']
    assert server_probe.log_tail(str(tmp_path / 'none'))[0].startswith('(cannot read')


def test_unit_properties_of_an_unknown_unit_are_empty_or_inactive():
    props = server_probe.unit_properties('eagle3-no-such-unit.service')
    assert set(props) == {'ActiveState', 'SubState', 'NRestarts'}
    assert props['ActiveState'] in ('', 'inactive')
