# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where one SGLang server listens: the bind host and HTTP port its variables give, checked.

``sglang_server_host`` and ``sglang_server_port`` alone set them (sglang_server_flags and
sglang_server_extra_args refuse host and port: plugin_utils/server_config.py), each its role's
default when not set. server_address.py makes the URLs of them; server_layout.py checks a
multi-node server's rank 0 with them. Both read a host's ``{variable: value}``. Every host:port and
URL the collection writes, of any host, is written here (url_host, host_port, http_url).
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults
# what an address is: value_rules' (a variable's rule reads it too), named here for the readers of this module
from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import (  # pylint: disable=unused-import
    HOST_NAME, LOOPBACK, ip, loopback)

# what the bind host and port are read from
READ = ('sglang_server_host', 'sglang_server_port')
WILDCARD = ('0.0.0.0', '::', '')
PORT = re.compile(r'[0-9]{1,5}')


def url_host(host):
    """``host`` as it stands in a URL or before a ``:port``: an IPv6 address in brackets (RFC 3986), every other
    host as it is. Every host:port and URL the collection writes is made here."""
    return '[%s]' % host if ':' in host else host


def host_port(host, port):
    """``host:port`` (``[v6]:port``), as Prometheus's targets, Mooncake's master address and torch's
    --dist-init-addr take it."""
    return '%s:%s' % (url_host(host), port)


def http_url(host, port):
    """``http://host:port`` (``http://[v6]:port``)."""
    return 'http://' + host_port(host, int(port))


class AddressError(ValueError):
    """A value the address cannot be made of; the message names the variable and its value."""


def defaults():
    """sglang_server_host and sglang_server_port as the role's argument spec defaults them."""
    return spec_defaults('sglang_server', READ)


def _port(variable, value):
    if isinstance(value, bool) or not isinstance(value, (int, str)) \
            or (isinstance(value, str) and not PORT.fullmatch(value)) or not 1 <= int(value) <= 65535:
        raise AddressError('%s=%s is not a port; give an integer from 1 to 65535' % (variable, show(value)))
    return int(value)


def _host(variable, value):
    if not isinstance(value, str) or not (value in WILDCARD or ip(value) or HOST_NAME.fullmatch(value)):
        raise AddressError('%s=%s is not an address to listen on; give an IPv4 or IPv6 address (without brackets), '
                           'a host name, 0.0.0.0 or ::' % (variable, show(value)))
    return value


def bind(values):
    """('sglang_server_host', the host the server binds); AddressError when bad."""
    return 'sglang_server_host', _host('sglang_server_host', values.get('sglang_server_host',
                                                                        defaults()['sglang_server_host']))


def http_port(values):
    """('sglang_server_port', the port the server serves HTTP on); AddressError when bad."""
    return 'sglang_server_port', _port('sglang_server_port', values.get('sglang_server_port',
                                                                        defaults()['sglang_server_port']))
