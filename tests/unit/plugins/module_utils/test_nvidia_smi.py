"""The nvidia-smi parsers (plugins/module_utils/nvidia_smi.py) against every real capture.

lab/fixtures/nvidia-smi/ holds real nvidia-smi output from a 2 x H200 machine and the
failures seen in public reports, byte for byte (see the INDEX.md files there). Every file
there is read by at least one test below; test_every_fixture_file_is_used fails when a new
capture arrives without a test. Captures that are not nvidia-smi output (fuser, /proc,
pynvml, ls) are independent witnesses: the parsers must agree with them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / 'lab' / 'fixtures' / 'nvidia-smi'

from ansible_collections.eagle3.extraction.plugins.module_utils import nvidia_smi

# Which test reads each fixture file.
USES = {
    'h200x2/INDEX.md': 'test_index_rows_name_existing_files, test_csv_queries_of_the_index',
    'reported/INDEX.md': 'test_index_rows_name_existing_files, test_reported_failures',
    'h200x2/idle/query-gpu-noheader-nounits.csv': 'test_idle_gpus',
    'h200x2/idle/query-gpu-full.csv': 'test_idle_gpus_with_header_and_units',
    'h200x2/idle/query-compute-apps.csv': 'test_idle_has_no_compute_apps',
    'h200x2/idle/query-compute-apps-noheader-nounits.csv': 'test_idle_has_no_compute_apps',
    'h200x2/busy/query-compute-apps.csv': 'test_busy_compute_apps',
    'h200x2/busy/query-gpu-memory-noheader-nounits.csv': 'test_busy_memory',
    'h200x2/idle/nvidia-smi.txt': 'test_summary_versions',
    'h200x2/busy/nvidia-smi.txt': 'test_summary_versions, test_busy_table_agrees_with_queries',
    'h200x2/idle/nvidia-smi-q.xml': 'test_xml_agrees_with_queries',
    'h200x2/idle/nvidia-smi-L.txt': 'test_list_agrees_with_queries',
    'h200x2/idle/topo-m.txt': 'test_topology_nvlink',
    'h200x2/idle/nvlink-s.txt': 'test_nvlink_status_agrees_with_topology',
    'h200x2/idle/proc-driver-nvidia-version.txt': 'test_proc_version',
    'h200x2/idle/pynvml-driver-count.txt': 'test_pynvml_agrees',
    'h200x2/idle/ls-dev-nvidia.txt': 'test_device_nodes_agree',
    'h200x2/idle/proc-devices-nvidia.txt': 'test_device_nodes_agree',
    'h200x2/busy/fuser-v-dev-nvidia.txt': 'test_busy_holders_agree',
    'h200x2/busy/proc-pid-fd-nvidia.txt': 'test_busy_holders_agree',
    'h200x2/errors/query-gpu-bogus-field.txt': 'test_captured_error',
    'reported/driver-library-mismatch.txt': 'test_reported_failures',
    'reported/driver-not-loaded.txt': 'test_reported_failures',
}

UUID0 = 'GPU-c78b0a93-9298-0633-b6f0-dd3c6ad32227'
UUID1 = 'GPU-c7824c5d-3680-98ef-652f-1e29b7908b6d'


def read(relative):
    """A capture exactly as stored: bytes decoded, no newline translation."""
    return (FIXTURES / relative).read_bytes().decode('utf-8')


def index_rows(index):
    """(command or description, file, exit code) of each table row in an INDEX.md."""
    if index.startswith('h200x2'):
        # | `command` | file | exit code |   (a command may itself contain a pipe)
        pattern, groups = r'^\| `(.+)` \| (\S+) \| (\d+) \|$', (1, 2, 3)
    else:
        # | file | what it is | exit code (and why) | source |
        pattern, groups = r'^\| (\S+\.txt) \| (.+?) \| (\d+)\b[^|]* \| .+ \|$', (2, 1, 3)
    folder = index.split('/')[0] + '/'
    return [(m.group(groups[0]), folder + m.group(groups[1]), int(m.group(groups[2])))
            for m in re.finditer(pattern, read(index), re.MULTILINE)]


USES_INDEXES = ('h200x2/INDEX.md', 'reported/INDEX.md')


def exit_code_of(relative):
    for index in USES_INDEXES:
        for row in index_rows(index):
            if row[1] == relative:
                return row[2]
    raise AssertionError('%s is in no INDEX.md' % relative)


def gpus_of(relative='h200x2/idle/query-gpu-full.csv'):
    return nvidia_smi.parse_gpus(read(relative), fields=None)


# ------------------------------------------------------------------ the fixture set


def test_every_fixture_file_is_used():
    on_disk = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob('*') if p.is_file())
    assert on_disk, 'no fixtures under %s' % FIXTURES
    assert on_disk == sorted(USES), 'fixture files without a test (or tests of missing files)'


def test_index_rows_name_existing_files():
    rows = [row for index in USES_INDEXES for row in index_rows(index)]
    # 18 captured commands, 2 reported failures; the XML capture is described in the prose
    assert len(rows) == 20
    for row in rows:
        assert (FIXTURES / row[1]).is_file(), row[1]
    described = set(row[1] for row in rows) | set(USES_INDEXES) | {'h200x2/idle/nvidia-smi-q.xml'}
    assert described == set(USES)
    assert '`idle/nvidia-smi-q.xml` is\n`nvidia-smi -q -x`' in read('h200x2/INDEX.md')


# ------------------------------------------------------------------ CSV queries


def _query(command):
    """(fields or None for a header, query kind) from an INDEX command line."""
    match = re.search(r'--query-(gpu|compute-apps)=(\S+) --format=(\S+)', command)
    if not match:
        return None
    fields = match.group(2).split(',')
    return match.group(1), (fields if 'noheader' in match.group(3) else None)


def test_csv_queries_of_the_index():
    """Every captured successful CSV query parses with the fields of its own command."""
    parsed = 0
    for command, file, rc in index_rows('h200x2/INDEX.md'):
        query = _query(command)
        if query is None or rc != 0:
            continue
        kind, fields = query
        text = read(file)
        if kind == 'gpu':
            rows = nvidia_smi.parse_gpus(text, fields)
            assert [row['index'] for row in rows] == [0, 1], file
            assert all(row['memory_total_mib'] == 143771 for row in rows if 'memory_total_mib' in row), file
        else:
            rows = nvidia_smi.parse_compute_apps(text, fields)
            assert all(isinstance(row['pid'], int) for row in rows), file
        parsed += 1
    assert parsed == 6


def test_idle_gpus():
    text = read('h200x2/idle/query-gpu-noheader-nounits.csv')
    fields = ['index', 'uuid', 'name', 'driver_version', 'memory.total', 'memory.used', 'memory.free']
    gpus = nvidia_smi.parse_gpus(text, fields)
    assert gpus == [
        {'index': 0, 'uuid': UUID0, 'name': 'NVIDIA H200', 'driver_version': '580.159.04',
         'memory_total_mib': 143771, 'memory_used_mib': 0, 'memory_free_mib': 143156},
        {'index': 1, 'uuid': UUID1, 'name': 'NVIDIA H200', 'driver_version': '580.159.04',
         'memory_total_mib': 143771, 'memory_used_mib': 0, 'memory_free_mib': 143156},
    ]


def test_idle_gpus_with_header_and_units():
    gpus = gpus_of('h200x2/idle/query-gpu-full.csv')
    assert [g['uuid'] for g in gpus] == [UUID0, UUID1]
    assert [g['pci_bus_id'] for g in gpus] == ['00000000:00:06.0', '00000000:00:07.0']
    assert [g['persistence_mode'] for g in gpus] == ['Enabled', 'Enabled']
    assert [g['memory_used_mib'] for g in gpus] == [0, 0]
    assert [g['memory_free_mib'] for g in gpus] == [143156, 143156]
    assert [g['power_draw_w'] for g in gpus] == [115.15, 119.99]
    assert [g['utilization_gpu_percent'] for g in gpus] == [0, 0]
    assert [g['compute_mode'] for g in gpus] == ['Default', 'Default']


def test_gpu_query_fields_of_gpu_facts_are_captured():
    """gpu_facts asks only for fields a real nvidia-smi answered (query-gpu-full.csv's header)."""
    header = read('h200x2/idle/query-gpu-full.csv').splitlines()[0]
    captured = [re.sub(r'\s*\[.*\]$', '', name.strip()) for name in header.split(',')]
    assert set(nvidia_smi.GPU_FIELDS) <= set(captured)
    apps = _query(next(row[0] for row in index_rows('h200x2/INDEX.md') if 'compute-apps' in row[0] and 'noheader' in row[0]))[1]
    assert nvidia_smi.COMPUTE_APP_FIELDS == tuple(apps)


def test_idle_has_no_compute_apps():
    assert read('h200x2/idle/query-compute-apps-noheader-nounits.csv') == ''
    assert nvidia_smi.parse_compute_apps(read('h200x2/idle/query-compute-apps-noheader-nounits.csv')) == []
    assert nvidia_smi.parse_compute_apps(read('h200x2/idle/query-compute-apps.csv'), fields=None) == []


def test_busy_compute_apps():
    apps = nvidia_smi.parse_compute_apps(read('h200x2/busy/query-compute-apps.csv'), fields=None)
    assert apps == [
        {'pid': 592, 'process_name': 'python3', 'used_memory_mib': 20998, 'gpu_uuid': UUID0},
        {'pid': 592, 'process_name': 'python3', 'used_memory_mib': 20998, 'gpu_uuid': UUID1},
    ]


def test_busy_memory():
    gpus = nvidia_smi.parse_gpus(read('h200x2/busy/query-gpu-memory-noheader-nounits.csv'),
                                 ['index', 'memory.used', 'memory.total'])
    assert gpus == [{'index': 0, 'memory_used_mib': 21007, 'memory_total_mib': 143771},
                    {'index': 1, 'memory_used_mib': 21007, 'memory_total_mib': 143771}]


def test_csv_rejects_a_short_line():
    with pytest.raises(ValueError, match='2 values for 3 fields'):
        nvidia_smi.parse_csv('0, 21007\n', ['index', 'memory.used', 'memory.total'])


def test_csv_not_available_values():
    gpus = nvidia_smi.parse_gpus('0, [N/A], [Not Supported]\n', ['index', 'memory.used', 'persistence_mode'])
    assert gpus == [{'index': 0, 'memory_used_mib': None, 'persistence_mode': None}]


def test_query_argv_is_a_list_in_the_captured_format():
    argv = nvidia_smi.query_argv('/usr/bin/nvidia-smi', 'compute-apps', nvidia_smi.COMPUTE_APP_FIELDS)
    assert argv == ['/usr/bin/nvidia-smi', '--query-compute-apps=pid,process_name,used_memory,gpu_uuid',
                    '--format=csv,noheader,nounits']
    assert ' '.join(['nvidia-smi'] + argv[1:]) in read('h200x2/INDEX.md')


# ------------------------------------------------------------------ summary, XML, -L


@pytest.mark.parametrize('state', ['idle', 'busy'])
def test_summary_versions(state):
    versions = nvidia_smi.parse_summary_versions(read('h200x2/%s/nvidia-smi.txt' % state))
    assert versions == {'nvidia_smi_version': '580.159.04', 'driver_version': '580.159.04', 'cuda_version': '13.0'}


def test_summary_without_driver_line_is_an_error():
    with pytest.raises(ValueError, match='Driver Version'):
        nvidia_smi.parse_summary_versions(read('h200x2/idle/nvidia-smi-L.txt'))


def test_xml_agrees_with_queries():
    root = ET.fromstring(read('h200x2/idle/nvidia-smi-q.xml').split('\n', 2)[2])  # past the DOCTYPE
    versions = nvidia_smi.parse_summary_versions(read('h200x2/idle/nvidia-smi.txt'))
    assert root.findtext('driver_version') == versions['driver_version']
    assert root.findtext('cuda_version') == versions['cuda_version']
    assert int(root.findtext('attached_gpus')) == len(gpus_of())
    for gpu, xml_gpu in zip(gpus_of(), root.findall('gpu')):
        assert xml_gpu.findtext('uuid') == gpu['uuid']
        assert xml_gpu.findtext('product_name') == gpu['name']
        assert xml_gpu.findtext('persistence_mode') == gpu['persistence_mode']
        assert xml_gpu.findtext('pci/pci_bus_id') == gpu['pci_bus_id']
        assert int(xml_gpu.findtext('minor_number')) == gpu['index']
        assert xml_gpu.findtext('fb_memory_usage/total') == '%d MiB' % gpu['memory_total_mib']
        assert xml_gpu.findtext('fb_memory_usage/used') == '%d MiB' % gpu['memory_used_mib']


def test_list_agrees_with_queries():
    listed = re.findall(r'^GPU (\d+): (.+) \(UUID: (\S+)\)$', read('h200x2/idle/nvidia-smi-L.txt'), re.MULTILINE)
    assert [(int(i), name, uuid) for i, name, uuid in listed] == [
        (g['index'], g['name'], g['uuid']) for g in gpus_of()]


def test_busy_table_agrees_with_queries():
    table = read('h200x2/busy/nvidia-smi.txt')
    apps = nvidia_smi.parse_compute_apps(read('h200x2/busy/query-compute-apps.csv'), fields=None)
    index_of = dict((g['uuid'], g['index']) for g in gpus_of())
    rows = re.findall(r'^\|\s+(\d+)\s+N/A\s+N/A\s+(\d+)\s+C\s+(\S+)\s+(\d+)MiB \|$', table, re.MULTILINE)
    assert sorted((int(g), int(p), n, int(m)) for g, p, n, m in rows) == sorted(
        (index_of[a['gpu_uuid']], a['pid'], a['process_name'], a['used_memory_mib']) for a in apps)
    used = [int(m) for m in re.findall(r'(\d+)MiB / 143771MiB', table)]
    busy = nvidia_smi.parse_gpus(read('h200x2/busy/query-gpu-memory-noheader-nounits.csv'),
                                 ['index', 'memory.used', 'memory.total'])
    assert used == [g['memory_used_mib'] for g in busy]


# ------------------------------------------------------------------ topology


def test_topology_nvlink():
    text = read('h200x2/idle/topo-m.txt')
    assert '\x1b[4m' in text.splitlines()[0], 'the capture keeps its ANSI header'
    topology = nvidia_smi.parse_topology(text)
    assert topology == {
        'pairs': [{'gpus': [0, 1], 'link': 'NV18', 'type': 'nvlink', 'nvlinks': 18}],
        'interconnect': 'nvlink',
    }


@pytest.mark.parametrize('cell', ['SYS', 'NODE', 'PHB', 'PXB', 'PIX'])
def test_topology_pcie(cell):
    """The captured matrix with its NVLink cell replaced by each PCIe path of the legend."""
    text = read('h200x2/idle/topo-m.txt')
    assert '  %s' % cell in text.split('Legend:')[1]
    topology = nvidia_smi.parse_topology(text.replace('NV18', cell))
    assert topology['pairs'] == [{'gpus': [0, 1], 'link': cell, 'type': 'pcie', 'nvlinks': 0}]
    assert topology['interconnect'] == 'pcie'


def test_topology_single_gpu_is_pcie():
    lines = read('h200x2/idle/topo-m.txt').splitlines(True)
    one_gpu = [lines[0].replace('GPU0\tGPU1', 'GPU0'), lines[1].replace('\tNV18', '')] + lines[3:]
    topology = nvidia_smi.parse_topology(''.join(one_gpu))
    assert topology == {'pairs': [], 'interconnect': 'pcie'}


def test_topology_without_matrix_is_an_error():
    with pytest.raises(ValueError):
        nvidia_smi.parse_topology(read('reported/driver-not-loaded.txt'))


def test_nvlink_status_agrees_with_topology():
    status = read('h200x2/idle/nvlink-s.txt')
    per_gpu = re.split(r'^GPU \d+: ', status, flags=re.MULTILINE)[1:]
    links = [len(re.findall(r'Link \d+: [\d.]+ GB/s', block)) for block in per_gpu]
    pair = nvidia_smi.parse_topology(read('h200x2/idle/topo-m.txt'))['pairs'][0]
    assert links == [pair['nvlinks'], pair['nvlinks']]


# ------------------------------------------------------------------ kernel module and witnesses


def test_proc_version():
    module = nvidia_smi.parse_proc_version(read('h200x2/idle/proc-driver-nvidia-version.txt'))
    assert module == {'version': '580.159.04', 'flavor': 'open',
                      'description': 'NVIDIA UNIX Open Kernel Module for x86_64'}
    assert module['version'] == gpus_of()[0]['driver_version']


def test_proc_version_proprietary_module():
    # the proprietary module's line, as /proc/driver/nvidia/version prints it
    text = 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n'
    assert nvidia_smi.parse_proc_version(text)['version'] == '535.104.05'
    assert nvidia_smi.parse_proc_version(text)['flavor'] == 'proprietary'
    with pytest.raises(ValueError):
        nvidia_smi.parse_proc_version('GCC version:  gcc version 15.3.0 (GCC)\n')


def test_pynvml_agrees():
    driver, count = read('h200x2/idle/pynvml-driver-count.txt').split()
    assert driver == nvidia_smi.parse_summary_versions(read('h200x2/idle/nvidia-smi.txt'))['driver_version']
    assert int(count) == len(gpus_of())


def test_device_nodes_agree():
    nodes = dict((name, (int(major), int(minor))) for major, minor, name in re.findall(
        r'^c\S+ +\d+ \S+ \S+ +(\d+), +(\d+) .* /dev/(nvidia\S*)$', read('h200x2/idle/ls-dev-nvidia.txt'),
        re.MULTILINE))
    majors = dict((name, int(major)) for major, name in re.findall(
        r'^(\d+) (\S+)$', read('h200x2/idle/proc-devices-nvidia.txt'), re.MULTILINE))
    for gpu in gpus_of():
        assert nodes['nvidia%d' % gpu['index']] == (majors['nvidia'], gpu['index'])
    assert nodes['nvidia-uvm'][0] == majors['nvidia-uvm']


def test_busy_holders_agree():
    """fuser and /proc/592/fd name the same holder, on the same GPUs, as --query-compute-apps."""
    apps = nvidia_smi.parse_compute_apps(read('h200x2/busy/query-compute-apps.csv'), fields=None)
    index_of = dict((g['uuid'], g['index']) for g in gpus_of())
    from_query = set((a['pid'], 'nvidia%d' % index_of[a['gpu_uuid']]) for a in apps)
    fuser = set((int(pid), node) for node, pid in re.findall(
        r'^/dev/(nvidia\d+):\s+\S+\s+(\d+)', read('h200x2/busy/fuser-v-dev-nvidia.txt'), re.MULTILINE))
    assert fuser == from_query
    fds = set(re.findall(r'-> /dev/(nvidia\d+)$', read('h200x2/busy/proc-pid-fd-nvidia.txt'), re.MULTILINE))
    assert set((592, node) for node in fds) == from_query


# ------------------------------------------------------------------ failures


def test_captured_error():
    relative = 'h200x2/errors/query-gpu-bogus-field.txt'
    error = nvidia_smi.classify_failure(exit_code_of(relative), read(relative))
    assert error.cause == 'invalid_field'
    assert 'Field "bogus_field" is not a valid field to query' in error.message


def test_reported_failures():
    rcs = dict((row[1], row[2]) for row in index_rows('reported/INDEX.md'))
    assert rcs == {'reported/driver-library-mismatch.txt': 18, 'reported/driver-not-loaded.txt': 9}

    mismatch = nvidia_smi.classify_failure(18, read('reported/driver-library-mismatch.txt'), '580.159.04')
    assert mismatch.cause == 'driver_library_mismatch'
    assert 'user-space library 550.144, kernel module 580.159.04' in mismatch.message
    assert 'Failed to initialize NVML: Driver/library version mismatch' in mismatch.message
    assert 'Reboot the host' in mismatch.message and '--no-kernel-module' in mismatch.message

    not_loaded = nvidia_smi.classify_failure(9, read('reported/driver-not-loaded.txt'))
    assert not_loaded.cause == 'driver_not_loaded'
    assert "couldn't communicate with the NVIDIA driver" in not_loaded.message
    assert 'modprobe nvidia' in not_loaded.message and '/dev/nvidia*' in not_loaded.message


@pytest.mark.parametrize('relative, cause', [
    ('reported/driver-library-mismatch.txt', 'driver_library_mismatch'),
    ('reported/driver-not-loaded.txt', 'driver_not_loaded'),
])
def test_failures_are_recognised_by_text_whatever_the_exit_code(relative, cause):
    assert nvidia_smi.classify_failure(255, read(relative)).cause == cause


def test_unknown_failure_keeps_the_output():
    error = nvidia_smi.classify_failure(15, 'Unable to determine the device handle for GPU0000:00:06.0: Unknown Error\n')
    assert error.cause == 'failed'
    assert 'exit code 15' in error.message and 'Unknown Error' in error.message


def test_the_gpus_in_a_few_words():
    gpus = [{'index': 0, 'name': 'NVIDIA H200'}, {'index': 1, 'name': 'NVIDIA H200'}]
    assert nvidia_smi.gpus_summary(gpus) == '2 x NVIDIA H200'
    assert nvidia_smi.gpus_summary(gpus[:1]) == '1 x NVIDIA H200'
    assert nvidia_smi.gpus_summary([]) == '-'
