# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find nvidia-smi and run it with a timeout: the one place the collection does either.

gpu_facts and process_reclaim both use it, so both look in the same directories and both
fail the same way: a failed run raises NvidiaSmiError with its cause (module_utils/nvidia_smi.py
reads the text), a run that hangs (a wedged driver) is killed at the timeout and raises
NvidiaSmiError with cause ``timeout``, naming the command and the timeout.
"""

from __future__ import annotations

import os

from ansible_collections.eagle3.extraction.plugins.module_utils import command
from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_smi import (
    MISSING_ADVICE, NvidiaSmiError, classify_failure, query_argv)

# where the NVIDIA driver's installers put nvidia-smi, searched after PATH
SEARCH_DIRS = ('/usr/bin', '/usr/local/bin', '/usr/sbin', '/sbin', '/usr/local/nvidia/bin')
# seconds one nvidia-smi call may take; a healthy one answers in well under a second a GPU
DEFAULT_TIMEOUT = 30


def find(module, path=None, kernel_module_version=None):
    """The nvidia-smi to run: ``path`` when given (the nvidia_smi_path option), else the one on
    PATH or in SEARCH_DIRS. Raises NvidiaSmiError (cause ``missing_binary``) when there is none."""
    if path is None:
        found = module.get_bin_path('nvidia-smi', opt_dirs=list(SEARCH_DIRS))
        where = 'on PATH or in %s' % ', '.join(SEARCH_DIRS)
    else:
        found = path
        where = 'at nvidia_smi_path %s' % path
    if found is None or not (os.path.isfile(found) and os.access(found, os.X_OK)):
        version = ' The kernel module here is %s.' % kernel_module_version if kernel_module_version else ''
        raise NvidiaSmiError('missing_binary', 'No executable nvidia-smi %s.%s %s' % (where, version, MISSING_ADVICE))
    return found


class NvidiaSmi(object):
    """One nvidia-smi binary, run with a timeout. ``run`` is command.run (tests give a fake)."""

    def __init__(self, path, timeout=DEFAULT_TIMEOUT, kernel_module_version=None, run=command.run):
        self.path = path
        self.timeout = timeout
        self.kernel_module_version = kernel_module_version
        self._run = run

    def output(self, args):
        """stdout of ``nvidia-smi <args>``; NvidiaSmiError when it fails or hangs."""
        argv = [self.path] + list(args)
        try:
            rc, out, err = self._run(argv, self.timeout)
        except command.CommandTimeout as exc:
            raise NvidiaSmiError('timeout', '%s The GPU driver may be wedged: check dmesg for Xid errors; a GPU '
                                 'reset or a reboot clears it.' % exc)
        except OSError as exc:
            raise NvidiaSmiError('missing_binary', 'cannot run %s: %s. %s' % (self.path, exc.strerror or exc,
                                                                              MISSING_ADVICE))
        if rc != 0:
            raise classify_failure(rc, out + err, self.kernel_module_version)
        return out

    def query(self, query, fields):
        """A CSV query: ``query`` is 'gpu' or 'compute-apps'."""
        return self.output(query_argv(self.path, query, fields)[1:])
