# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter online_training_window: the producer's in-flight watermarks, plugin_utils/online_training.py's."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.plugin_utils.online_training import WindowError, window


def online_training_window(config, online, settings):
    """{high, low, sample_bytes, window_bytes, hidden_size, aux_layers} of the target's config.json."""
    try:
        return window(config, online, settings)
    except (WindowError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('online_training: %s' % exc) from None


class FilterModule(object):
    def filters(self):
        return {'online_training_window': online_training_window}
