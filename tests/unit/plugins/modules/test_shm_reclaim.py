"""shm_reclaim with real files and real processes: a segment that a live process
has open or mapped stays, an unheld one goes, and nothing but regular files
matching the globs is ever touched. Plus a fake /proc tree for what a real one
cannot show (unreadable and vanished processes, holders seen under another path).
The module runs in-process (ansible-core's patch_module_args)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

from ansible_collections.eagle3.extraction.plugins.module_utils import procfs
from ansible_collections.eagle3.extraction.plugins.modules import shm_reclaim

# keeps the file open, nothing else
OPEN_HOLDER = [sys.executable, '-c',
               'import sys, time; f = open(sys.argv[1], "rb"); print("ready", flush=True); time.sleep(120)']

# maps the file and closes the fd, so only /proc/<pid>/maps shows it. Python's
# mmap.mmap keeps a dup of the fd (before 3.13's trackfd=False): call libc instead
MAP_HOLDER = [sys.executable, '-c', '''
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
addr = libc.mmap(None, os.fstat(fd).st_size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
os.close(fd)
print("ready", flush=True)
time.sleep(120)
''']

SIZES = {'nccl-a': 4096, 'nccl-b': 12345, 'psm_c': 8192, 'other.bin': 100}


@pytest.fixture
def shm_dir(tmp_path):
    """A fresh directory on /dev/shm (tmpfs, as in production) when we may write there, else under tmp_path."""
    base = '/dev/shm' if os.access('/dev/shm', os.W_OK) else str(tmp_path)
    path = tempfile.mkdtemp(prefix='shm-reclaim-test.', dir=base)
    try:
        yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def populate(root):
    for name, size in SIZES.items():
        (root / name).write_bytes(b'\1' * size)
    (root / 'nccl-dir').mkdir()
    (root / 'nccl-dir' / 'nccl-inner').write_bytes(b'x')
    (root / 'target.bin').write_bytes(b'y' * 10)
    # a symlink named like a segment, pointing at an unheld file: neither may go
    (root / 'nccl-link').symlink_to(root / 'target.bin')


def start(argv, path):
    child = subprocess.Popen(argv + [str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == 'ready'
    return child


def stop(*children):
    for child in children:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()


def fd_keys(pid):
    fd_dir = '/proc/%d/fd' % pid
    keys = set()
    for name in os.listdir(fd_dir):
        try:
            st = os.stat(os.path.join(fd_dir, name))
        except OSError:
            continue
        keys.add((st.st_dev, st.st_ino))
    return keys


def key(path):
    st = os.lstat(path)
    return (st.st_dev, st.st_ino)


def paths(entries):
    return [e['path'] for e in entries]


def test_held_files_stay_stale_ones_go(shm_dir, run_module):
    populate(shm_dir)
    opener = mapper = None
    try:
        opener = start(OPEN_HOLDER, shm_dir / 'nccl-a')
        mapper = start(MAP_HOLDER, shm_dir / 'psm_c')
        # the mapper really holds psm_c through its mapping only
        assert key(shm_dir / 'psm_c') not in fd_keys(mapper.pid)
        assert key(shm_dir / 'nccl-a') in fd_keys(opener.pid)

        # check mode: the same report, nothing removed
        checked = run_module(shm_reclaim, {'path': str(shm_dir), '_ansible_check_mode': True})
        assert (shm_dir / 'nccl-b').exists()
        assert checked['changed'] is True
        assert paths(checked['removed']) == [str(shm_dir / 'nccl-b')]
        assert checked['bytes_freed'] == SIZES['nccl-b']

        result = run_module(shm_reclaim, {'path': str(shm_dir)})
        assert result['changed'] is True and 'failed' not in result
        assert result['removed'] == [{'path': str(shm_dir / 'nccl-b'), 'size': SIZES['nccl-b'], 'holders': []}]
        assert result['bytes_freed'] == SIZES['nccl-b']
        assert result['kept'] == [
            {'path': str(shm_dir / 'nccl-a'), 'size': SIZES['nccl-a'], 'reason': 'held',
             'holders': [{'pid': opener.pid, 'name': procfs.read_comm(opener.pid)}]},
            {'path': str(shm_dir / 'psm_c'), 'size': SIZES['psm_c'], 'reason': 'held',
             'holders': [{'pid': mapper.pid, 'name': procfs.read_comm(mapper.pid)}]},
        ]
        assert isinstance(result['unreadable_pids'], list)
        for field in ('removed', 'kept', 'bytes_freed', 'unreadable_pids'):
            assert checked[field] == result[field], field

        assert not (shm_dir / 'nccl-b').exists()
        for name in ('nccl-a', 'psm_c', 'other.bin', 'target.bin', 'nccl-dir/nccl-inner'):
            assert (shm_dir / name).is_file(), name
        assert (shm_dir / 'nccl-link').is_symlink()

        again = run_module(shm_reclaim, {'path': str(shm_dir)})
        assert again['changed'] is False and again['removed'] == [] and again['bytes_freed'] == 0
        assert paths(again['kept']) == [str(shm_dir / 'nccl-a'), str(shm_dir / 'psm_c')]
    finally:
        stop(opener, mapper)


def test_files_go_once_their_holders_exit(shm_dir):
    populate(shm_dir)
    opener = mapper = None
    try:
        opener = start(OPEN_HOLDER, shm_dir / 'nccl-a')
        mapper = start(MAP_HOLDER, shm_dir / 'psm_c')
        stop(opener, mapper)
        result = shm_reclaim.reclaim_shm(str(shm_dir), ['nccl-*', 'psm_*'], 0, check_mode=False)
    finally:
        stop(opener, mapper)
    assert paths(result['removed']) == [str(shm_dir / n) for n in ('nccl-a', 'nccl-b', 'psm_c')]
    assert result['bytes_freed'] == SIZES['nccl-a'] + SIZES['nccl-b'] + SIZES['psm_c']
    assert result['kept'] == []


def test_patterns_choose_the_files(shm_dir):
    populate(shm_dir)
    result = shm_reclaim.reclaim_shm(str(shm_dir), ['*.bin'], 0, check_mode=False)
    # target.bin is the symlink's target: removed as a file of its own, the link stays (dangling)
    assert paths(result['removed']) == [str(shm_dir / 'other.bin'), str(shm_dir / 'target.bin')]
    assert (shm_dir / 'nccl-a').exists() and (shm_dir / 'nccl-link').is_symlink()
    # case-sensitive, as the shell is on Linux
    assert shm_reclaim.reclaim_shm(str(shm_dir), ['NCCL-*'], 0, check_mode=True)['removed'] == []


def test_min_age_keeps_a_fresh_file(shm_dir):
    (shm_dir / 'nccl-old').write_bytes(b'o' * 7)
    (shm_dir / 'nccl-fresh').write_bytes(b'f' * 3)
    hour_ago = time.time() - 3600
    os.utime(shm_dir / 'nccl-old', (hour_ago, hour_ago))
    result = shm_reclaim.reclaim_shm(str(shm_dir), ['nccl-*'], 600, check_mode=False)
    assert result['changed'] is True
    assert paths(result['removed']) == [str(shm_dir / 'nccl-old')] and result['bytes_freed'] == 7
    assert result['kept'] == [{'path': str(shm_dir / 'nccl-fresh'), 'size': 3, 'holders': [],
                               'reason': 'younger than min_age'}]
    assert (shm_dir / 'nccl-fresh').exists()
    # the same file, once old enough
    later = shm_reclaim.reclaim_shm(str(shm_dir), ['nccl-*'], 600, check_mode=False, now=time.time() + 601)
    assert paths(later['removed']) == [str(shm_dir / 'nccl-fresh')]


def test_missing_directory_is_no_change(tmp_path, run_module):
    result = run_module(shm_reclaim, {'path': str(tmp_path / 'absent')})
    assert 'failed' not in result and result['changed'] is False
    assert result['removed'] == [] and result['kept'] == [] and result['bytes_freed'] == 0
    assert result['unreadable_pids'] == []
    assert result['msg'] == '%s does not exist, nothing to reclaim' % (tmp_path / 'absent')


def test_bad_values_fail(tmp_path, run_module):
    result = run_module(shm_reclaim, {'path': str(tmp_path), 'min_age': -1})
    assert result['failed'] is True and 'min_age: -1.0 is out of range' in result['msg']
    (tmp_path / 'plain').write_bytes(b'')
    result = run_module(shm_reclaim, {'path': str(tmp_path / 'plain')})
    assert result['failed'] is True and 'is not a directory' in result['msg']


def test_removal_errors_fail_after_trying_every_file(shm_dir, run_module, monkeypatch):
    for name in ('nccl-1', 'nccl-2', 'nccl-3'):
        (shm_dir / name).write_bytes(b'z' * 5)
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        if os.path.basename(path) == 'nccl-2':
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), path)
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(shm_reclaim.os, 'unlink', unlink)
    result = run_module(shm_reclaim, {'path': str(shm_dir)})
    assert result['failed'] is True and result['changed'] is True
    assert result['msg'] == 'could not remove 1 file(s): %s: %s' % (shm_dir / 'nccl-2', os.strerror(errno.EPERM))
    assert paths(result['removed']) == [str(shm_dir / 'nccl-1'), str(shm_dir / 'nccl-3')]
    assert result['bytes_freed'] == 10
    assert (shm_dir / 'nccl-2').exists() and not (shm_dir / 'nccl-1').exists()


def test_a_file_replaced_since_the_scan_is_left_alone(shm_dir):
    (shm_dir / 'nccl-r').write_bytes(b'1')
    candidates = shm_reclaim.find_candidates(str(shm_dir), ['nccl-*'])
    (shm_dir / 'nccl-r').unlink()
    (shm_dir / 'nccl-r').write_bytes(b'22')  # a new segment under the old name
    stale = [{'path': c['path'], 'size': c['size'], 'holders': []} for c in candidates]
    assert shm_reclaim.remove(stale, candidates) == ([], [])
    assert (shm_dir / 'nccl-r').read_bytes() == b'22'


def test_parse_maps():
    text = ('55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 1311781                    /usr/bin/python3.12\n'
            '7f1c2a000000-7f1c2a400000 rw-s 00000000 00:1a 42                         /dev/shm/psm_a b\n'
            '7f1c2b000000-7f1c2b021000 rw-p 00000000 00:00 0 \n'
            '7ffd1e9d5000-7ffd1e9f6000 rw-p 00000000 00:00 0                          [stack]\n'
            '7f1c2c000000-7f1c2c001000 r--s 00000000 103:0a 77\n'
            'garbage\n')
    keys, map_paths = shm_reclaim.parse_maps(text)
    assert keys == {(0xfd, 0x01, 1311781), (0, 0x1a, 42), (0x103, 0x0a, 77)}
    assert map_paths == {'/usr/bin/python3.12', '/dev/shm/psm_a b'}


def fake_proc(root, processes):
    """A /proc tree: pid -> {'fd': [link targets] | 'file' (cannot be listed), 'maps': text | 'dir', 'comm': name}."""
    for pid, spec in processes.items():
        pid_dir = root / str(pid)
        pid_dir.mkdir(parents=True)
        fds = spec.get('fd')
        if fds == 'file':
            (pid_dir / 'fd').write_text('')  # listdir: ENOTDIR, as unreadable as EACCES
        elif fds is not None:
            (pid_dir / 'fd').mkdir()
            for number, target in enumerate(fds):
                (pid_dir / 'fd' / str(number)).symlink_to(target)
        maps = spec.get('maps')
        if maps == 'dir':
            (pid_dir / 'maps').mkdir()  # open: EISDIR
        elif maps is not None:
            (pid_dir / 'maps').write_text(maps)
        if 'comm' in spec:
            (pid_dir / 'comm').write_text(spec['comm'] + '\n')


def test_holders_by_inode_under_other_paths_and_unreadable_processes(shm_dir, tmp_path):
    for name in ('nccl-fd', 'nccl-map', 'nccl-free', 'psm_hidden'):
        (shm_dir / name).write_bytes(b'q' * 9)
    # another name of nccl-fd (same device and inode), as a process in another
    # mount namespace would see it
    elsewhere = shm_dir / 'elsewhere'
    elsewhere.mkdir()
    os.link(shm_dir / 'nccl-fd', elsewhere / 'alias')
    st = os.stat(shm_dir / 'nccl-map')
    maps_line = '7f0000000000-7f0000001000 rw-s 00000000 %02x:%02x %d   /somewhere/else/psm_x\n' % (
        os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    proc = tmp_path / 'proc'
    fake_proc(proc, {
        100: {'fd': ['socket:[123]', 'pipe:[9]', str(elsewhere / 'alias')], 'maps': '', 'comm': 'opener'},
        200: {'fd': [], 'maps': maps_line, 'comm': 'mapper'},
        300: {'fd': 'file', 'maps': '', 'comm': 'secretive'},
        400: {'fd': [], 'maps': 'dir', 'comm': 'secretive2'},
        500: {},  # exited between listing /proc and reading it: not unreadable, holds nothing
    })
    result = shm_reclaim.reclaim_shm(str(shm_dir), ['nccl-*', 'psm_*'], 0, check_mode=False, proc_root=str(proc))
    assert result['unreadable_pids'] == [300, 400]
    assert result['kept'] == [
        {'path': str(shm_dir / 'nccl-fd'), 'size': 9, 'reason': 'held', 'holders': [{'pid': 100, 'name': 'opener'}]},
        {'path': str(shm_dir / 'nccl-map'), 'size': 9, 'reason': 'held', 'holders': [{'pid': 200, 'name': 'mapper'}]},
    ]
    # unreadable processes do not stop removal
    assert paths(result['removed']) == [str(shm_dir / 'nccl-free'), str(shm_dir / 'psm_hidden')]
    assert (elsewhere / 'alias').exists()


def test_no_candidates_skip_the_proc_scan(shm_dir, tmp_path):
    (shm_dir / 'other.bin').write_bytes(b'')
    # a proc_root that does not exist would raise if it were listed
    result = shm_reclaim.reclaim_shm(str(shm_dir), ['nccl-*'], 0, check_mode=False, proc_root=str(tmp_path / 'none'))
    assert result == {'changed': False, 'removed': [], 'kept': [], 'bytes_freed': 0, 'unreadable_pids': []}
