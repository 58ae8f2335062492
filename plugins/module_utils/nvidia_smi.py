# Copyright (c) eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what nvidia-smi and the NVIDIA kernel module print.

Pure functions over text, so that they can be tested against real captures
(lab/fixtures/nvidia-smi/). Nothing here runs a command.

- CSV queries (``--query-gpu`` / ``--query-compute-apps``), with or without
  header and units.
- The header of plain ``nvidia-smi`` (the only short form that prints the CUDA
  version).
- ``nvidia-smi topo -m``: the link between each pair of GPUs, and whether the
  GPUs are joined by NVLink or only by PCIe.
- ``/proc/driver/nvidia/version``: the loaded kernel module.
- nvidia-smi's failures: the driver/library mismatch, a driver that is not
  loaded, a field the driver does not know, with the cause and what to do.
"""

from __future__ import annotations

import csv
import re

# The query gpu_facts runs for each GPU, and the one for compute processes.
# Every field is one of those in the captured queries (INDEX.md of the fixtures).
GPU_FIELDS = (
    'index', 'uuid', 'name', 'driver_version', 'memory.total', 'memory.used',
    'persistence_mode', 'pci.bus_id',
)
COMPUTE_APP_FIELDS = ('pid', 'process_name', 'used_memory', 'gpu_uuid')

# nvidia-smi's own values for "nothing to report"
_NOT_AVAILABLE = ('N/A', '[N/A]', '[Not Supported]', 'Not Supported', '[Unknown Error]', '[Insufficient Permissions]', '')

_UNIT_SUFFIX = re.compile(r'\s+(MiB|KiB|GiB|%|W|MHz)$')
_HEADER_UNIT = re.compile(r'\s*\[[^\]]*\]$')
_ANSI_ESCAPE = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')


class NvidiaSmiError(Exception):
    """nvidia-smi failed; ``cause`` is one of CAUSES, ``message`` says what to do."""

    def __init__(self, cause, message, output=''):
        super(NvidiaSmiError, self).__init__(message)
        self.cause = cause
        self.message = message
        self.output = output


def query_argv(binary, query, fields):
    """argv of a CSV query: query is 'gpu' or 'compute-apps'."""
    return [binary, '--query-%s=%s' % (query, ','.join(fields)), '--format=csv,noheader,nounits']


def value_or_none(value):
    """A CSV value with its unit cut off, or None where nvidia-smi has none."""
    value = value.strip()
    if value in _NOT_AVAILABLE:
        return None
    return _UNIT_SUFFIX.sub('', value)


def int_or_none(value):
    value = value_or_none(value)
    return None if value is None else int(value)


def float_or_none(value):
    value = value_or_none(value)
    return None if value is None else float(value)


def parse_csv(text, fields=None):
    """Rows of a CSV query as dicts keyed by query field name.

    With ``fields`` the output is taken as ``noheader``; without, the first
    line is the header (its ``[MiB]`` unit marks are dropped). Values are
    strings; a unit after a value (``0 MiB``) stays until converted.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            raise ValueError('CSV output without a header line')
        fields = [_HEADER_UNIT.sub('', name.strip()) for name in lines.pop(0).split(',')]
    rows = []
    for values in csv.reader(lines, skipinitialspace=True):
        if len(values) != len(fields):
            raise ValueError('CSV line has %d values for %d fields (%s): %r'
                             % (len(values), len(fields), ', '.join(fields), ', '.join(values)))
        rows.append(dict(zip(fields, values)))
    return rows


# query field (or its header name) -> (key in our result, converter)
_GPU_KEYS = {
    'index': ('index', int_or_none),
    'uuid': ('uuid', value_or_none),
    'name': ('name', value_or_none),
    'driver_version': ('driver_version', value_or_none),
    'memory.total': ('memory_total_mib', int_or_none),
    'memory.used': ('memory_used_mib', int_or_none),
    'memory.free': ('memory_free_mib', int_or_none),
    'utilization.gpu': ('utilization_gpu_percent', int_or_none),
    'power.draw': ('power_draw_w', float_or_none),
    'temperature.gpu': ('temperature_c', int_or_none),
    'persistence_mode': ('persistence_mode', value_or_none),
    'pci.bus_id': ('pci_bus_id', value_or_none),
    'compute_mode': ('compute_mode', value_or_none),
}
_COMPUTE_APP_KEYS = {
    'pid': ('pid', int_or_none),
    'process_name': ('process_name', value_or_none),
    'used_memory': ('used_memory_mib', int_or_none),
    'used_gpu_memory': ('used_memory_mib', int_or_none),  # the header's name for used_memory
    'gpu_uuid': ('gpu_uuid', value_or_none),
}


def _convert(rows, keys):
    out = []
    for row in rows:
        record = {}
        for field, value in row.items():
            if field not in keys:
                raise ValueError('unknown nvidia-smi field %r' % field)
            key, convert = keys[field]
            record[key] = convert(value)
        out.append(record)
    return out


def parse_gpus(text, fields=GPU_FIELDS):
    """One dict a GPU from ``--query-gpu`` (fields=None: output with header)."""
    return _convert(parse_csv(text, fields), _GPU_KEYS)


def parse_compute_apps(text, fields=COMPUTE_APP_FIELDS):
    """One dict a (process, GPU) from ``--query-compute-apps``."""
    return _convert(parse_csv(text, fields), _COMPUTE_APP_KEYS)


_SUMMARY_VERSIONS = {
    'nvidia_smi_version': re.compile(r'NVIDIA-SMI\s+(\S+)'),
    'driver_version': re.compile(r'Driver Version:\s+(\S+)'),
    'cuda_version': re.compile(r'CUDA Version:\s+(\S+)'),
}


def parse_summary_versions(text):
    """Versions in the header of plain ``nvidia-smi``.

    ``| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |``:
    nvidia-smi's own (user-space) version, the loaded driver's, and the highest
    CUDA version that driver supports. A missing one is None.
    """
    versions = {}
    for key, pattern in _SUMMARY_VERSIONS.items():
        match = pattern.search(text)
        versions[key] = value_or_none(match.group(1)) if match else None
    if versions['driver_version'] is None:
        raise ValueError('no "Driver Version:" in the nvidia-smi output')
    return versions


def gpus_summary(gpus):
    """The GPUs in a few words, for a report: ``2 x NVIDIA H200`` (the count and the first GPU's name), or
    ``-`` for none."""
    if not gpus:
        return '-'
    return '%d x %s' % (len(gpus), gpus[0]['name'])


# topo -m cell -> kind of link
_PCIE_LINKS = ('SYS', 'NODE', 'PHB', 'PXB', 'PIX', 'SOC')


def classify_link(cell):
    """'self', 'nvlink', 'pcie' or 'unknown' for one cell of ``topo -m``."""
    if cell == 'X':
        return 'self'
    if cell.startswith('NV'):
        return 'nvlink'
    if cell in _PCIE_LINKS:
        return 'pcie'
    return 'unknown'


def parse_topology(text):
    """The GPU-to-GPU part of ``nvidia-smi topo -m``.

    The header line is tab-separated and wrapped in ANSI underline codes; the
    device columns (GPUn, and NICn on machines with NICs) come before
    ``CPU Affinity``. Returns ``{'pairs': [...], 'interconnect': ...}`` where
    each pair is ``{'gpus': [a, b], 'link': 'NV18', 'type': 'nvlink',
    'nvlinks': 18}`` and interconnect is ``nvlink`` when there are at least two
    GPUs and every pair is joined by NVLink, else ``pcie``.
    """
    lines = [_ANSI_ESCAPE.sub('', line) for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if re.match(r'^\s*GPU\d+\t', line)), None)
    if header_at is None:
        raise ValueError('no GPU column header in the topo -m output')
    columns = [name.strip() for name in lines[header_at].strip().split('\t')]
    devices = []
    for name in columns:
        if name == 'CPU Affinity' or ' ' in name:
            break
        devices.append(name)
    gpu_columns = [(i, int(name[3:])) for i, name in enumerate(devices) if re.match(r'^GPU\d+$', name)]

    pairs = []
    for line in lines[header_at + 1:]:
        if not line.strip():
            break  # the legend follows an empty line
        cells = [cell.strip() for cell in line.split('\t')]
        match = re.match(r'^GPU(\d+)$', cells[0])
        if not match:
            continue  # a NIC row
        row_gpu = int(match.group(1))
        links = cells[1:1 + len(devices)]
        for column, col_gpu in gpu_columns:
            if col_gpu <= row_gpu:
                continue  # each pair once, and not a GPU with itself
            link = links[column]
            nvlinks = re.match(r'^NV(\d+)$', link)
            pairs.append({
                'gpus': [row_gpu, col_gpu],
                'link': link,
                'type': classify_link(link),
                'nvlinks': int(nvlinks.group(1)) if nvlinks else 0,
            })
    nvlink_everywhere = bool(pairs) and all(pair['type'] == 'nvlink' for pair in pairs)
    return {'pairs': pairs, 'interconnect': 'nvlink' if nvlink_everywhere else 'pcie'}


_PROC_VERSION = re.compile(r'^NVRM version:\s+(?P<description>.*?Kernel Module(?: for \S+)?)\s+(?P<version>\d+(?:\.\d+)+)',
                           re.MULTILINE)


def parse_proc_version(text):
    """The loaded kernel module from ``/proc/driver/nvidia/version``.

    ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...``
    (open) or ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ...``
    (proprietary).
    """
    match = _PROC_VERSION.search(text)
    if not match:
        raise ValueError('no "NVRM version:" line with a version')
    return {
        'version': match.group('version'),
        'flavor': 'open' if 'Open Kernel Module' in match.group('description') else 'proprietary',
        'description': match.group('description'),
    }


# What each failure means and what to do about it.
MISMATCH_ADVICE = (
    'The loaded NVIDIA kernel module and the user-space NVIDIA libraries are different versions '
    '(typically after a driver upgrade without a reboot). Reboot the host, or unload and reload the nvidia '
    'kernel modules, so that the module matches the installed libraries. In an LXC container the kernel '
    'module is the hypervisor\'s: install exactly the hypervisor\'s driver version in the container '
    '(the .run installer with --no-kernel-module).')
NOT_LOADED_ADVICE = (
    'nvidia-smi cannot reach the NVIDIA kernel driver. Load the driver on the hypervisor (modprobe nvidia, '
    'then nvidia-smi there) and check that the /dev/nvidia* device nodes (nvidia0..N, nvidiactl, nvidia-uvm) '
    'are passed into the container.')
MISSING_ADVICE = (
    'Install the NVIDIA user-space driver in the container, the same version as the hypervisor\'s kernel '
    'module (the .run installer with --no-kernel-module), or set the path to nvidia-smi.')

CAUSES = ('driver_library_mismatch', 'driver_not_loaded', 'invalid_field', 'missing_binary', 'timeout', 'failed')


def classify_failure(rc, output, kernel_module_version=None):
    """NvidiaSmiError for a failed nvidia-smi run (rc != 0), from its exit code and text.

    nvidia-smi prints these failures on stdout; ``output`` is stdout and
    stderr together. kernel_module_version (from /proc/driver/nvidia/version,
    if readable) makes the mismatch message name both sides.
    """
    text = ' '.join(line.strip() for line in output.splitlines() if line.strip()).rstrip('.')
    if rc == 18 or 'Driver/library version mismatch' in text:
        library = re.search(r'NVML library version:\s*(\S+)', text)
        sides = []
        if library:
            sides.append('user-space library %s' % library.group(1))
        if kernel_module_version:
            sides.append('kernel module %s' % kernel_module_version)
        found = ' (%s)' % ', '.join(sides) if sides else ''
        return NvidiaSmiError('driver_library_mismatch', 'NVIDIA driver/library version mismatch%s: %s. %s'
                              % (found, text, MISMATCH_ADVICE), output)
    if rc == 9 or "couldn't communicate with the NVIDIA driver" in text:
        return NvidiaSmiError('driver_not_loaded', 'NVIDIA driver not loaded: %s. %s'
                              % (text, NOT_LOADED_ADVICE), output)
    if 'is not a valid field to query' in text:
        return NvidiaSmiError('invalid_field', 'nvidia-smi does not know a queried field (a driver older than '
                              'these queries?): %s' % text, output)
    return NvidiaSmiError('failed', 'nvidia-smi failed with exit code %s: %s' % (rc, text or '(no output)'), output)
