# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""text_table: rows of cells as lines of a plain-text table, each column as wide as its
widest cell, two spaces between columns (so a cell may hold single spaces: a reader
splits on two or more), no trailing blanks."""

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

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

CONTROL = re.compile(r'[\x00-\x1f\x7f-\x9f\u2028\u2029]')


def cell_text(cell):
    return CONTROL.sub('?', '' if cell is None else to_text(cell))


def text_table(rows):
    if not isinstance(rows, (list, tuple)) or not all(isinstance(row, (list, tuple)) for row in rows):
        raise AnsibleFilterError('text_table: give a list of rows, each a list of cells; got %r' % (rows,))
    cells = [[cell_text(cell) for cell in row] for row in rows]
    columns = max([len(row) for row in cells] or [0])
    cells = [row + [''] * (columns - len(row)) for row in cells]
    widths = [max(len(row[i]) for row in cells) for i in range(columns)]
    return ['  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]


class FilterModule(object):
    def filters(self):
        return {'text_table': text_table}
