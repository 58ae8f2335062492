# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The venv's interpreter: the one owner of that fact.

ml_env makes the venv at ``ml_env_path`` (its argument spec's default when not set) and publishes its
interpreter, ``<ml_env_path>/bin/python``, as the fact ``ml_env_python_bin``. The roles that run with it
(sglang_server, sglang_patch, extraction_job) default to that fact, and, where ml_env has not run, to the
same path computed here (lookup eagle3.extraction.ml_env_python); ml_env computes its own the same way.
None writes the path again.
"""

from __future__ import annotations

import os

from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults

# the interpreter inside a venv
VENV_PYTHON = os.path.join('bin', 'python')


def default_path():
    """ml_env_path as the ml_env role's argument spec defaults it."""
    return spec_defaults('ml_env', ('ml_env_path',))['ml_env_path']


def venv_python(path=None):
    """The interpreter of the venv at ``path`` (default: ml_env's ml_env_path)."""
    venv = path if path else default_path()
    return os.path.join(venv.rstrip('/') or '/', VENV_PYTHON)
