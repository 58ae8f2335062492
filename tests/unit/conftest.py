"""Shared by the unit tests under tests/unit/.

The tests import the collection as ``ansible_collections.eagle3.extraction`` through
.ansible/collections (pytest.ini's ``pythonpath``), the way ansible-test units does.
"""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def run_module(capsys):
    """run_module(module, args): module.main() run in-process with args (ansible-core's
    patch_module_args; _ansible_check_mode and the like go in args); returns its result dict."""
    # imported here, not at the top: pytest imports this file in every venv (tests/conftest.py)
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel

    def run(module, args):
        with patch_module_args(args):
            with pytest.raises(SystemExit):
                module.main()
        return json.loads(capsys.readouterr().out)
    return run
