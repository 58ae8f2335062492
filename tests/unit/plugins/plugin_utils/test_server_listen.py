# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one writer of host:port and URLs: an IPv6 address in brackets, every other host as given."""

from __future__ import annotations

import pytest

from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import host_port, http_url, url_host


@pytest.mark.parametrize('host, expected', [
    ('10.0.0.1', '10.0.0.1'), ('ct1.lab', 'ct1.lab'), ('fd00:200::101', '[fd00:200::101]'), ('::1', '[::1]')])
def test_an_ipv6_address_is_bracketed_and_nothing_else(host, expected):
    assert url_host(host) == expected


def test_host_port_and_url_take_the_port_as_an_int_or_its_digits():
    assert host_port('fd00::1', 6000) == '[fd00::1]:6000'
    assert host_port('10.0.0.1', '6000') == '10.0.0.1:6000'
    assert http_url('fd00::1', '30000') == 'http://[fd00::1]:30000'
    assert http_url('127.0.0.1', 30000) == 'http://127.0.0.1:30000'
