# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""text_table: rows of cells as lines of a plain-text table (module_utils/text_table.py,
the renderer every table of the collection goes through)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: text_table
short_description: Rows of cells as the lines of a plain-text table with aligned columns
version_added: 0.1.0
description:
  - Each column is as wide as its widest cell; columns are separated by two spaces and lines carry no trailing blanks.
  - Cells are shown as strings; C(none) as an empty cell. Control characters in a cell are shown as C(?), so that a
    cell can never break its line.
options:
  _input:
    description: The rows, the header first; each a list of cells. Short rows are padded with empty cells.
    type: list
    elements: list
    required: true
'''

EXAMPLES = r'''
- name: Print a table
  ansible.builtin.debug:
    msg: "{{ [['HOST', 'HEALTH'], ['ct1', 'healthy']] | eagle3.extraction.text_table | join('\n') }}"
'''

RETURN = r'''
_value:
  description: One string per row.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.module_utils.text_table import table_lines


def text_table(rows):
    try:
        return table_lines(rows)
    except ValueError as exc:
        raise AnsibleFilterError('text_table: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'text_table': text_table}
