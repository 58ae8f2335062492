"""text_table: aligned columns a reader can split on two spaces, whatever the cells hold."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.eagle3.extraction.plugins.filter.text_table import text_table


def test_columns_are_as_wide_as_their_widest_cell():
    lines = text_table([['HOST', 'GPUS', 'RUN'], ['ct1', '2 x NVIDIA H200', 'applied'], ['ct10', '-', 'unchanged']])
    assert lines == [
        'HOST  GPUS             RUN',
        'ct1   2 x NVIDIA H200  applied',
        'ct10  -                unchanged',
    ]
    # the way tests/integration/test_rollout.py reads it back
    assert re.split(r'\s{2,}', lines[1]) == ['ct1', '2 x NVIDIA H200', 'applied']


def test_no_trailing_blanks_short_rows_none_and_numbers():
    lines = text_table([['A', 'B', 'C'], ['x'], [None, 3, 1.5]])
    assert lines == ['A  B  C', 'x', '   3  1.5']
    assert all(line == line.rstrip() for line in lines)


def test_a_cell_cannot_break_its_line():
    lines = text_table([['HOST', 'CAUSE'], ['ct1', 'first\nsecond\rthird\u2028']])
    assert len(lines) == 2 and lines[1] == 'ct1   first?second?third?'


def test_empty_and_bad_input():
    assert text_table([]) == []
    for bad in ('not rows', [['ok'], 'a string row'], None):
        with pytest.raises(AnsibleFilterError, match='list of rows'):
            text_table(bad)
