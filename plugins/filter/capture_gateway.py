# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter capture_gateway_config: the online mode's capture gateway config, plugin_utils/capture_gateway.py's."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.plugin_utils.capture_gateway import (
    GatewayConfigError, gateway_config)


def capture_gateway_config(online, settings):
    """The gateway's config dict from the host plan's online section and the role's settings."""
    try:
        return gateway_config(online, settings)
    except GatewayConfigError as exc:
        raise AnsibleFilterError('capture_gateway_config: %s' % exc) from None


class FilterModule(object):
    def filters(self):
        return {'capture_gateway_config': capture_gateway_config}
