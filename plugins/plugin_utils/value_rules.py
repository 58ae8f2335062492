# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The building blocks of a variable's rule beyond its type: ranges, whole-value patterns, paths
that must not be system directories, lists of those.

A rule is what a variable's record (plugin_utils/role_variables/<role>.py) says it may hold
beyond the argument spec's type and choices; role_inputs.py applies them. A rule's check returns a
reason ('out of range') or None, and its ``what`` says what to give instead: the message names the
variable and its value around them.
"""

from __future__ import annotations

import ipaddress
import math
import re

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import VMID_MAX, VMID_MIN, show

# Directories a venv, a dump dir or a log must not be (nor the parent of a removed tree).
SYSTEM_DIRS = frozenset([
    '/', '/bin', '/boot', '/dev', '/etc', '/home', '/lib', '/lib32', '/lib64', '/libx32', '/media', '/mnt', '/opt',
    '/proc', '/root', '/run', '/sbin', '/srv', '/sys', '/tmp', '/usr', '/usr/bin', '/usr/lib', '/usr/lib64',
    '/usr/local', '/usr/local/bin', '/usr/local/lib', '/usr/sbin', '/usr/share', '/var', '/var/lib', '/var/log',
    '/var/tmp', '/dev/shm', '/etc/sglang', '/var/log/sglang',
])
# Trees nothing of ours may live in (of /dev, only /dev/shm holds files of ours).
SYSTEM_TREES = ('/proc/', '/sys/', '/boot/')

# Trees where data that must outlive a reboot cannot be safe: memory filesystems (/dev/shm, /run: lost on reboot, and
# the dump dir's tmpfs counts against the job's watermark) and the system's own files (/etc/ssh...).
NOT_DURABLE_TREES = ('/dev/shm/', '/dev/', '/run/', '/var/run/', '/proc/', '/sys/', '/etc/', '/boot/', '/usr/', '/bin/',
                     '/sbin/', '/lib/', '/lib32/', '/lib64/', '/libx32/')

# Directories every Debian or Ubuntu container has and another package owns (root:ssl-cert 0710, root:systemd-journal
# 2755...): a dir the role makes and chowns (extraction_job's install, config, data and log dirs) is never one of
# them nor inside one. The role's owned_paths refuses such a dir once the container is up; this refuses it before
# anything changes, in the inventory check and the role's first check alike.
SYSTEM_OWNED_TREES = (
    '/etc/ssl', '/etc/ssh', '/etc/systemd', '/etc/pam.d', '/etc/security', '/etc/sudoers.d', '/etc/apt', '/etc/cron.d',
    '/etc/cron.daily', '/etc/default', '/etc/init.d', '/etc/network', '/etc/logrotate.d', '/etc/sysctl.d',
    '/etc/modprobe.d', '/etc/udev', '/etc/dbus-1', '/etc/profile.d', '/etc/ld.so.conf.d', '/etc/pve', '/etc/lxc',
    '/var/log/journal', '/var/log/apt', '/var/log/private', '/var/lib/systemd', '/var/lib/dpkg', '/var/lib/apt',
    '/var/lib/private', '/var/cache', '/var/spool', '/var/mail', '/var/backups', '/var/lib/lxc', '/var/lib/vz',
)
# Units systemd and the base system ship (their template or plain names): a unit the role writes or stops by name
# must not be one of them (stop.yml would stop every user@*.service), nor any systemd-*.
SYSTEM_UNITS = frozenset([
    'user', 'user-runtime-dir', 'getty', 'serial-getty', 'container-getty', 'console-getty', 'autovt', 'modprobe',
    'emergency', 'rescue', 'dbus', 'ssh', 'sshd', 'cron', 'rsyslog', 'networking', 'default', 'multi-user',
    'graphical', 'basic', 'sysinit', 'local-fs', 'remote-fs', 'network', 'network-online', 'sockets', 'timers',
    'paths', 'shutdown', 'reboot', 'poweroff', 'halt', 'kexec', 'ctrl-alt-del', 'console-setup', 'keyboard-setup',
    'apparmor', 'ifup', 'polkit', 'postfix', 'chrony', 'logrotate', 'man-db', 'apt-daily', 'apt-daily-upgrade',
    'e2scrub', 'e2scrub_all', 'fstrim', 'dpkg-db-backup', 'unattended-upgrades', 'nvidia-persistenced', 'lxcfs',
    'lxc', 'pve-container', 'pvedaemon', 'pveproxy', 'pve-cluster', 'kmod-static-nodes', 'setvtrgb',
])

# the patterns more than one role's variables take
DOTTED_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*')
# a unit's name without its .service, which the role adds (a name ending in .service gave After=x.service.service)
UNIT_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9:_.@-]{0,200}(?<!\.service)')
NODE_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}')
HOST = re.compile(r'[A-Za-z0-9_.:-]{1,253}')
DECIMAL = re.compile(r'[0-9]+(\.[0-9]*)?|\.[0-9]+')
# an address: an IP (ip()) or a host name; LOOPBACK and loopback(): one that serves only its own host
LOOPBACK = ('127.0.0.1', 'localhost', '::1')
HOST_NAME = re.compile(r'(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
                       r'(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*')


def ip(text):
    """text as an IP address, else None."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def loopback(host):
    """Whether a host is a loopback address (a bind host that serves only its own container)."""
    return host in LOOPBACK or bool(ip(host) and ip(host).is_loopback)


class Rule:
    """One variable's rule beyond its type: check(value) -> a reason or None; what: what to give."""

    def __init__(self, check, what, whole_message=False):
        self.check = check
        self.what = what
        # the check's reason is already a whole message naming the variable (the config file's checks)
        self.whole_message = whole_message


def number(minimum, maximum, unit=''):
    """A finite number (not a boolean) from minimum to maximum."""
    def check(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return 'not a number'
        if isinstance(value, float) and not math.isfinite(value):
            return 'not a finite number'
        if not minimum <= value <= maximum:
            return 'out of range'
        return None
    return Rule(check, 'a number from %s to %s%s' % (minimum, maximum, ' ' + unit if unit else ''))


def pattern(regex, what, empty=False):
    """A string the regex matches whole (or empty, when empty is true)."""
    def check(value):
        if empty and value == '':
            return None
        if not isinstance(value, str) or not regex.fullmatch(value):
            return 'not allowed'
        return None
    return Rule(check, what + (' (or empty)' if empty else ''))


def path_error(value, empty=False, suffixes=None):
    """Why value is not a plain absolute path outside the system's directories, or None."""
    if empty and value == '':
        return None
    if not isinstance(value, str) or not value.startswith('/') or '\\' in value:
        return 'not an absolute path'
    parts = value.split('/')
    if '..' in parts or '.' in parts or '//' in value or re.search(r'\s', value):
        return 'not a plain absolute path'
    if '%' in value:
        # the paths end up in unit files (ExecStart, WorkingDirectory, Environment), where systemd expands %i, %h...
        return 'a path with %, which systemd expands in a unit file (a specifier)'
    normal = value.rstrip('/') or '/'
    if normal in SYSTEM_DIRS or (normal + '/').startswith(SYSTEM_TREES) or (
            normal.startswith('/dev/') and not normal.startswith('/dev/shm/')):
        return 'a system directory'
    if suffixes and not normal.endswith(suffixes):
        return 'not a %s file' % ' or '.join(suffixes)
    return None


def path(empty=False, suffixes=None, what='an absolute path that is not a system directory'):
    """A plain absolute path that is not a system directory (path_error)."""
    return Rule(lambda value: path_error(value, empty, suffixes), what + (' (or empty)' if empty else ''))


def _in_system_owned_tree(normal):
    """The SYSTEM_OWNED_TREES dir that normal (a path without its trailing /) is or is inside, else None."""
    return next((tree for tree in SYSTEM_OWNED_TREES if normal == tree or normal.startswith(tree + '/')), None)


def owned_dir(what='an absolute path that is not a system directory nor inside one another package owns'):
    """A dir the role makes and chowns: a plain absolute path (path_error), not SYSTEM_OWNED_TREES' nor in one."""
    def check(value):
        reason = path_error(value)
        if reason:
            return reason
        tree = _in_system_owned_tree(value.rstrip('/'))
        return 'in %s, a directory the system owns' % tree if tree else None
    return Rule(check, what)


def unit_name(regex, what):
    """A unit's name the regex matches whole, that is none of the system's (SYSTEM_UNITS, systemd-*)."""
    def check(value):
        if not isinstance(value, str) or not regex.fullmatch(value):
            return 'not allowed'
        base = value.split('@', 1)[0]
        if base in SYSTEM_UNITS or base.startswith('systemd-'):
            return 'the name of a unit the system has (%s)' % ('%s@.service' % base if '@' in value else base)
        return None
    return Rule(check, what + ', not one the system has (user, getty, systemd-*...)')


def durable_path(what='an absolute path on durable storage, outside the system\'s dirs and memory filesystems '
                      '(/dev/shm, /run, /etc...)'):
    """A plain absolute path (path_error) outside NOT_DURABLE_TREES: where output that must outlive a reboot goes."""
    def check(value):
        reason = path_error(value)
        if reason:
            return reason
        normal = value.rstrip('/') + '/'
        tree = next((tree for tree in NOT_DURABLE_TREES if normal.startswith(tree)), None)
        if tree:
            return 'under %s, where nothing is durable or ours' % tree.rstrip('/')
        tree = _in_system_owned_tree(value.rstrip('/'))
        return 'in %s, a directory the system owns' % tree if tree else None
    return Rule(check, what)


def secret_string(name, check=None):
    """A secret (an API key): a string, then check(value) -> a whole message or None. A number from YAML
    (api_key: 12345) is refused, not turned into a string, naming the variable; the value is never shown."""
    def rule_check(value):
        if not isinstance(value, str):
            return '%s=(hidden) is not a string (%s); give it as a string: quote it' % (name, type(value).__name__)
        return check(value) if check else None
    return Rule(rule_check, 'a string on one line', whole_message=True)


def each(rule):
    """A list whose every item passes rule."""
    def check(value):
        if not isinstance(value, (list, tuple)):
            return 'not a list'
        for index, item in enumerate(value):
            reason = rule.check(item)
            if reason:
                return 'refused at item %d (%s: %s)' % (index, show(item), reason)
        return None
    return Rule(check, 'a list, each item ' + rule.what)


def vmid(allow_zero):
    """A Proxmox container ID (0 too, meaning none, when allow_zero)."""
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int):
            return 'not an integer'
        if allow_zero and value == 0:
            return None
        return None if VMID_MIN <= value <= VMID_MAX else 'out of range'
    return Rule(check, 'an integer from %d to %d%s' % (VMID_MIN, VMID_MAX, ' (0: none)' if allow_zero else ''))


def fraction(value):
    """value as a number when it is one (or a decimal string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and DECIMAL.fullmatch(value):
        return float(value)
    return None
