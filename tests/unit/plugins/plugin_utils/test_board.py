"""The board the workers of one run share: a post replaces the host's value whole, a reader sees only
the hosts that posted, a wait returns as soon as the host posts (or None at its timeout), and each
play of a run has its own board."""

from __future__ import annotations

import os
import threading

from ansible_collections.eagle3.extraction.plugins.plugin_utils.board import Board, play_board


def test_a_post_is_read_back_and_replaced_whole(tmp_path):
    board = Board(str(tmp_path / 'b'))
    assert board.read(['pve1']) == {}
    board.post('pve1', {'running': [101]})
    board.post('pve1', {'running': [102]})
    assert board.read(['pve1', 'pve2']) == {'pve1': {'running': [102]}}
    # no partial file is left beside the posts
    assert sorted(os.listdir(str(tmp_path / 'b'))) == ['pve1.json']


def test_a_host_name_cannot_leave_the_board(tmp_path):
    board = Board(str(tmp_path / 'b'))
    board.post('../escape', {'x': 1})
    assert os.listdir(str(tmp_path)) == ['b']
    assert board.read(['../escape']) == {'../escape': {'x': 1}}


def test_a_wait_ends_when_the_host_posts(tmp_path):
    board = Board(str(tmp_path / 'b'))
    later = threading.Timer(0.1, board.post, args=('pve1', {'answered': True}))
    later.start()
    try:
        assert board.wait('pve1', timeout=30) == {'answered': True}
    finally:
        later.cancel()


def test_a_wait_gives_up_at_its_timeout(tmp_path):
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
    assert Board(str(tmp_path / 'b')).wait('pve1', timeout=5, clock=lambda: now[0], sleep=sleep) is None
    assert 5 <= now[0] < 5.1


def test_each_play_has_its_own_board(tmp_path):
    play_board(str(tmp_path), 'pct_list', 'play-1').post('pve1', {'answered': True})
    assert play_board(str(tmp_path), 'pct_list', 'play-2').read(['pve1']) == {}
    assert play_board(str(tmp_path), 'pct_list', 'play-1').read(['pve1']) == {'pve1': {'answered': True}}
