"""module_utils/validate.py: a number option reaches the module as the task gave it (type raw,
number_option) and convert_numbers turns it into its number or names it; no plugin reads
ansible-core's private state (basic._ANSIBLE_ARGS, _load_params) to see the given values."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import (
    convert_numbers, inventory_int, number_option, option_value_errors)
from ansible_collections.eagle3.extraction.plugins.modules import pct_container, port_reclaim

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize('value,kind,expected', [
    (8000, 'int', 8000), ('8000', 'int', 8000), ('-1', 'int', -1), (2.0, 'int', 2),
    (10, 'float', 10.0), ('10', 'float', 10.0), ('0.5', 'float', 0.5), ('.5', 'float', 0.5), ('1e3', 'float', 1000.0),
    ([1, '2'], 'int', [1, 2]),
])
def test_a_number_as_given_is_converted(value, kind, expected):
    params = {'x': value}
    assert convert_numbers(params, {'x': kind}) == []
    assert params['x'] == expected and type(params['x']) is type(expected)


@pytest.mark.parametrize('value,kind', [
    (True, 'int'), (False, 'float'), ('80\n', 'int'), ('10\n', 'float'), (' 10', 'float'), ('inf', 'int'),
    ('inf', 'float'), ('nan', 'float'), ('-Infinity', 'int'), ('ten', 'int'), ('', 'int'), (1.5, 'int'),
    ('1.5', 'int'), (float('inf'), 'int'), ([1, True], 'int'), (['12\n'], 'int'), ({'a': 1}, 'int'), ('0x10', 'int'),
])
def test_what_is_not_a_number_is_named_and_cleared(value, kind):
    params = {'x': value}
    errors = convert_numbers(params, {'x': kind})
    assert len(errors) == 1 and errors[0].startswith('x'), errors
    assert params['x'] in (None, [])


def test_a_nan_float_is_left_to_the_range_check():
    params = {'x': float('nan')}
    assert convert_numbers(params, {'x': 'float'}) == [] and math.isnan(params['x'])


def test_control_characters_are_named_in_the_other_options_only():
    params = {'port': '80\n', 'address': '127.0.0.1\n', 'none': None}
    errors = option_value_errors(params, {'port': 'int'})
    assert len(errors) == 2 and errors[0].startswith('port: ') and errors[1].startswith('address: ')


def test_a_number_option_is_raw_in_the_spec():
    assert number_option('int', required=True) == {'type': 'raw', 'required': True}
    assert number_option('int', type='list', default=[]) == {'type': 'list', 'elements': 'raw', 'default': []}


def run(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize('port', ['inf', '-Infinity', '80\n', True])
def test_a_module_names_what_ansible_would_have_converted_or_crashed_on(port, capsys):
    result = run(port_reclaim, {'port': port}, capsys)
    assert result['failed'] and result['msg'].startswith('port: ') and 'Traceback' not in result['msg']


def test_rootfs_size_needs_storage_through_required_by(capsys):
    result = run(pct_container, {'vmid': 101, 'rootfs_size': 8, 'pct_path': '/bin/true'}, capsys)
    assert result['failed'] and "required by 'rootfs_size': storage" in result['msg']


def test_no_plugin_reads_ansible_core_private_state():
    private = re.compile(r'_ANSIBLE_ARGS|_load_params|basic\._')
    offenders = [str(path.relative_to(REPO)) for path in sorted((REPO / 'plugins').rglob('*.py'))
                 if private.search(path.read_text())]
    assert offenders == []


@pytest.mark.parametrize('value, digits, expected', [
    (471, 4, 471), ('471', 4, 471), ('0471', 4, 471), ('12345', 4, None), (True, 4, None), (4.0, 4, None),
    ('-1', 4, None), (' 1', 4, None), ('1\n', 4, None), ('', 4, None), (None, 4, None), ('123456789', 9, 123456789),
])
def test_inventory_int_takes_an_int_or_its_digits_and_nothing_else(value, digits, expected):
    assert inventory_int(value, digits) == expected


@pytest.mark.parametrize('value, wanted', [
    (101, 101), ('101', 101), ('999999999', 999999999), ('1000000000', None), ('101\n', None), ('1e3', None),
    ('', None), (None, None), (True, None), (1.5, None), ('-1', None),
])
def test_inventory_vmid_reads_an_id_as_an_inventory_writes_it(value, wanted):
    from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_vmid
    assert inventory_vmid(value) == wanted
