# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a hypervisor's pct_list result is an answer: the one rule, which the filter rollout_refusal and
converged_state's action (plugin_utils/converged_inputs.py) read."""

from __future__ import annotations


def _text(value):
    return str(value if value is not None else '').strip()


def no_answer(listed, node):
    """Why the pct_list result ``listed`` of hypervisor ``node`` (None: not in this run) is no answer, or '' when
    it answered."""
    if listed is None:
        return ('hypervisor %s is unreachable: it is not in this run: name it in --limit beside its containers'
                % node)
    if listed.get('unreachable'):
        return 'hypervisor %s is unreachable: %s' % (node, _text(listed.get('msg')) or 'it was not reached')
    if 'running' not in listed:
        return 'pct list failed on hypervisor %s (rc %s): %s' % (
            node, listed.get('rc', '-') if listed.get('rc') is not None else '-',
            _text(listed.get('stderr')) or _text(listed.get('msg')))
    return ''
