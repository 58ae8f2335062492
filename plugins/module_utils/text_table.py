# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table renderer of the collection: rows of cells as the lines of a plain-text
table. Every table the collection prints (extract.yml's rollout table, status.yml's progress
table) is made here, so that they align, escape and split the same way.

Each column is as wide as its widest cell, two spaces between columns (so a cell may hold
single spaces: a reader splits on two or more), no trailing blanks. Control characters in a
cell are shown as ``?``, so that a cell (a cause copied from a command's output) can never
break its line. Standard library only: it runs in modules on the containers too.
"""

from __future__ import annotations

import re

CONTROL = re.compile(u'[\x00-\x1f\x7f-\x9f\u2028\u2029]')


def cell_text(cell):
    if cell is None:
        return ''
    if isinstance(cell, bytes):
        cell = cell.decode('utf-8', 'replace')
    return CONTROL.sub('?', cell if isinstance(cell, str) else str(cell))


def is_rows(rows):
    return isinstance(rows, (list, tuple)) and all(isinstance(row, (list, tuple)) for row in rows)


def table_lines(rows):
    """``rows`` (the header first, each a list of cells; short rows padded) -> one string a row."""
    if not is_rows(rows):
        raise ValueError('give a list of rows, each a list of cells; got %r' % (rows,))
    cells = [[cell_text(cell) for cell in row] for row in rows]
    columns = max([len(row) for row in cells] or [0])
    cells = [row + [''] * (columns - len(row)) for row in cells]
    widths = [max(len(row[i]) for row in cells) for i in range(columns)]
    return ['  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
