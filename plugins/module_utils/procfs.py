# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what the reclaim modules need straight from /proc (Linux only).

Every reader takes ``proc_root`` so that unit tests can point it at captured
files. A process may exit between listing /proc and reading its files: readers
return None (or an empty value) for a vanished process instead of raising.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
import sys

PROC = '/proc'

# /proc/<pid>/stat field 9; set for kernel threads (include/linux/sched.h)
PF_KTHREAD = 0x00200000

# include/net/tcp_states.h: TCP_LISTEN
TCP_LISTEN = '0A'

_SOCKET_LINK = re.compile(r'^socket:\[(\d+)\]$')


def _read(path, binary=False):
    """Contents of a /proc file, or None if the process (or file) is gone.

    os.open/os.read: a process table of thousands is read for every scan, and
    this is several times faster than open() with its buffering and decoding.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        # gone (ENOENT, ESRCH), or not ours to read (EACCES)
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b''.join(chunks)
    return data if binary else data.decode('utf-8', 'replace')


def list_pids(proc_root=PROC):
    """All numeric entries of /proc, sorted."""
    pids = []
    for name in os.listdir(proc_root):
        if name.isdigit():
            pids.append(int(name))
    pids.sort()
    return pids


# ---------------------------------------------------------------- /proc/<pid>/*

def parse_status(text):
    """/proc/<pid>/status as a dict of the fields we use.

    Keys: name, state (one letter), tgid, pid, ppid, uid (real), nspid (list of
    ints, outermost first, innermost last; [pid] on kernels without NSpid).
    """
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(':')
        if sep:
            fields[key] = value.strip()
    info = {
        'name': _unescape_status_name(fields.get('Name', '')),
        'state': (fields.get('State') or '?')[0],
        'tgid': int(fields.get('Tgid', '0') or 0),
        'pid': int(fields.get('Pid', '0') or 0),
        'ppid': int(fields.get('PPid', '0') or 0),
        'uid': int(fields.get('Uid', '0').split()[0]) if fields.get('Uid') else 0,
    }
    nspid = fields.get('NSpid')
    info['nspid'] = [int(p) for p in nspid.split()] if nspid else [info['pid']]
    return info


def _unescape_status_name(name):
    # the kernel escapes '\n' as '\\n' and '\\' as '\\\\' in the Name: field
    return name.replace('\\n', '\n').replace('\\\\', '\\')


def parse_stat(text):
    """/proc/<pid>/stat: comm, state, ppid, flags, starttime.

    comm is in parentheses and may itself contain spaces and ')': split at the
    last ')' (what procps does).
    """
    open_paren = text.index('(')
    close_paren = text.rindex(')')
    comm = text[open_paren + 1:close_paren]
    rest = text[close_paren + 2:].split()
    # rest[0] is field 3 (state); field n is rest[n - 3]
    return {
        'pid': int(text[:open_paren].strip()),
        'comm': comm,
        'state': rest[0],
        'ppid': int(rest[1]),
        'flags': int(rest[6]),
        'starttime': int(rest[19]),
    }


def parse_cmdline(data):
    """/proc/<pid>/cmdline (bytes) as a list of arguments.

    Zombies and kernel threads have an empty cmdline. A process that rewrote its
    title (setproctitle, SGLang's ``sglang::scheduler_TP0``) may leave one
    argument padded with NULs or spaces; empty trailing pieces are dropped.
    """
    if not data:
        return []
    parts = data.split(b'\0')
    while parts and parts[-1] == b'':
        parts.pop()
    return [p.decode('utf-8', 'replace') for p in parts]


def read_status(pid, proc_root=PROC):
    text = _read(os.path.join(proc_root, str(pid), 'status'))
    return parse_status(text) if text else None


def read_stat(pid, proc_root=PROC):
    text = _read(os.path.join(proc_root, str(pid), 'stat'))
    if not text:
        return None
    try:
        return parse_stat(text)
    except (ValueError, IndexError):
        return None


def read_cmdline(pid, proc_root=PROC):
    return parse_cmdline(_read(os.path.join(proc_root, str(pid), 'cmdline'), binary=True))


def read_comm(pid, proc_root=PROC):
    text = _read(os.path.join(proc_root, str(pid), 'comm'))
    return text.rstrip('\n') if text is not None else None


def read_cgroup(pid, proc_root=PROC):
    """Cgroup paths of a process, one per hierarchy (v1) or the single v2 one."""
    text = _read(os.path.join(proc_root, str(pid), 'cgroup'))
    return parse_cgroup(text or '')


def parse_cgroup(text):
    paths = []
    for line in text.splitlines():
        # "hierarchy-ID:controller-list:cgroup-path"; the path may contain ':'
        parts = line.split(':', 2)
        if len(parts) == 3:
            paths.append(parts[2])
    return paths


def namespace_id(pid, kind, proc_root=PROC):
    """The namespace link (e.g. 'net:[4026531840]') of a process, or None."""
    try:
        return os.readlink(os.path.join(proc_root, str(pid), 'ns', kind))
    except OSError:
        return None


def read_fd_links(pid, proc_root=PROC):
    """[(link path, target)] of /proc/<pid>/fd/*: the one reader of a process's open files.

    Raises OSError when the directory cannot be listed (another user's process
    without root, or a process that is gone); an fd closed while we read is skipped.
    """
    fd_dir = os.path.join(proc_root, str(pid), 'fd')
    links = []
    for name in os.listdir(fd_dir):
        link = os.path.join(fd_dir, name)
        try:
            links.append((link, os.readlink(link)))
        except OSError:
            continue
    return links


def fd_targets(pid, proc_root=PROC):
    """Link targets of /proc/<pid>/fd/*; empty if unreadable (not ours, gone)."""
    try:
        return [target for _link, target in read_fd_links(pid, proc_root)]
    except OSError:
        return []


def socket_inode(link_target):
    """Inode of a 'socket:[12345]' fd link, or None for anything else."""
    match = _SOCKET_LINK.match(link_target)
    return int(match.group(1)) if match else None


def socket_inodes(pid, proc_root=PROC):
    inodes = set()
    for target in fd_targets(pid, proc_root):
        inode = socket_inode(target)
        if inode is not None:
            inodes.add(inode)
    return inodes


_USER_NAMES = {}


def user_name(uid):
    """Login name of uid (cached: one NSS lookup a uid, not one a process)."""
    if uid not in _USER_NAMES:
        try:
            _USER_NAMES[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _USER_NAMES[uid] = str(uid)
    return _USER_NAMES[uid]


# ------------------------------------------------------------- process snapshot

class Process(object):
    """What one read of /proc/<pid> told us about a process.

    Built from stat and cmdline, the two cheap files; status (real uid, NSpid),
    which the kernel takes much longer to produce, is read on first use, since
    a scan only needs it for the few processes it selects.
    """

    __slots__ = ('pid', 'ppid', 'state', 'name', 'cmdline', 'starttime', 'kernel_thread', '_status', '_proc_root')

    def __init__(self, pid, ppid, state, name, cmdline, starttime, kernel_thread, uid=None, nspid=None,
                 proc_root=PROC):
        self.pid = pid
        self.ppid = ppid
        self.state = state
        self.name = name
        self.cmdline = cmdline
        self.starttime = starttime
        self.kernel_thread = kernel_thread
        self._proc_root = proc_root
        self._status = None
        if uid is not None or nspid is not None:
            self._status = {'uid': 0 if uid is None else uid, 'nspid': nspid or [pid]}

    def _load_status(self):
        if self._status is None:
            self._status = read_status(self.pid, self._proc_root) or {'uid': -1, 'nspid': [self.pid]}
        return self._status

    @property
    def uid(self):
        return self._load_status()['uid']

    @property
    def user(self):
        uid = self.uid
        return user_name(uid) if uid >= 0 else None

    @property
    def nspid(self):
        return self._load_status()['nspid']

    @property
    def command(self):
        """The command line as one string; the name in brackets when empty
        (zombies, kernel threads), as ps shows it."""
        return ' '.join(self.cmdline) if self.cmdline else '[%s]' % self.name

    @property
    def zombie(self):
        return self.state == 'Z'

    def as_dict(self):
        return {
            'pid': self.pid,
            'ppid': self.ppid,
            'user': self.user,
            'uid': self.uid,
            'state': self.state,
            'name': self.name,
            'cmdline': self.command,
            'nspid': list(self.nspid),
        }


def read_process(pid, proc_root=PROC):
    """A Process for pid, or None if it is gone."""
    stat = read_stat(pid, proc_root)
    if stat is None:
        return None
    return Process(
        pid=pid,
        ppid=stat['ppid'],
        state=stat['state'],
        name=stat['comm'],
        cmdline=read_cmdline(pid, proc_root),
        starttime=stat['starttime'],
        kernel_thread=bool(stat['flags'] & PF_KTHREAD),
        proc_root=proc_root,
    )


def snapshot(proc_root=PROC):
    """Every process visible in proc_root, by pid (threads are not listed:
    /proc only lists thread group leaders)."""
    processes = {}
    for pid in list_pids(proc_root):
        proc = read_process(pid, proc_root)
        if proc is not None:
            processes[pid] = proc
    return processes


def is_alive(pid, starttime, proc_root=PROC):
    """True while the process that had this pid and start time runs.

    A zombie (or dead task) counts as gone: it holds no memory, fds or sockets
    any more. A different start time means the pid was reused by another
    process, which we must not mistake for (or signal as) the one we saw.
    """
    stat = read_stat(pid, proc_root)
    if stat is None or stat['starttime'] != starttime:
        return False
    return stat['state'] not in ('Z', 'X', 'x')


def exists(pid, starttime, proc_root=PROC):
    """True while this pid still names the process with this start time,
    zombie or not (a zombie is gone once its parent reaps it)."""
    stat = read_stat(pid, proc_root)
    return stat is not None and stat['starttime'] == starttime


def ancestors(pid, proc_root=PROC):
    """Parent chain of pid up to (not including) pid 0, nearest first."""
    chain = []
    seen = set()
    current = pid
    while current > 0 and current not in seen:
        seen.add(current)
        stat = read_stat(current, proc_root)
        if stat is None:
            break
        parent = stat['ppid']
        if parent <= 0:
            break
        chain.append(parent)
        current = parent
    return chain


# ------------------------------------------------------------- /proc/net/tcp{,6}

def _decode_address(hex_address):
    """'0100007F' -> 127.0.0.1; 32 hex digits -> IPv6.

    The kernel prints the address as 32-bit words in host byte order.
    """
    raw = bytes.fromhex(hex_address)
    if sys.byteorder == 'little':
        raw = b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(raw)


def parse_net_tcp(text, family):
    """Sockets of /proc/net/tcp (family 'ipv4') or tcp6 ('ipv6') as dicts:
    address (ipaddress object), port, state (hex, '0A' = LISTEN), uid, inode."""
    sockets = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        hex_addr, _sep, hex_port = fields[1].partition(':')
        sockets.append({
            'family': family,
            'address': _decode_address(hex_addr),
            'port': int(hex_port, 16),
            'state': fields[3],
            'uid': int(fields[7]),
            'inode': int(fields[9]),
        })
    return sockets


def read_tcp_sockets(net_dir):
    """All TCP sockets of the network namespace whose /proc net dir is given:
    /proc/net for our own, /proc/<pid>/net for the one <pid> lives in."""
    sockets = []
    for name, family in (('tcp', 'ipv4'), ('tcp6', 'ipv6')):
        text = _read(os.path.join(net_dir, name))
        if text:
            sockets.extend(parse_net_tcp(text, family))
    return sockets


def listener_matches(sock, port, address=None):
    """Whether a listening socket conflicts with a server that wants
    address:port (address None: any listener on the port).

    A socket bound to the wildcard of its family catches every address of that
    family; '::' is dual-stack on Linux by default, so it catches IPv4 too (we
    cannot see IPV6_V6ONLY in /proc, so we assume the default).
    """
    if sock['state'] != TCP_LISTEN or sock['port'] != port:
        return False
    if address is None:
        return True
    bound = sock['address']
    if isinstance(bound, ipaddress.IPv6Address) and bound.ipv4_mapped is not None:
        bound = bound.ipv4_mapped
    if bound.is_unspecified:
        return bound.version == address.version or bound.version == 6
    if address.is_unspecified:
        # a server binding the wildcard conflicts with every listener of its
        # family, and '::' (dual-stack) with IPv4 ones too
        return bound.version == address.version or address.version == 6
    return bound == address


def find_listeners(port, address=None, net_dir=os.path.join(PROC, 'net')):
    return [s for s in read_tcp_sockets(net_dir) if listener_matches(s, port, address)]
