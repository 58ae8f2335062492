# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox VE containers through the ``pct`` CLI and ``/etc/pve/lxc/<vmid>.conf``.

Everything here follows pve-container (src/PVE/LXC/Config.pm, src/PVE/CLI/pct.pm) and
pve-common (JSONSchema.pm):

* ``pct status <vmid>`` prints exactly ``status: running`` or ``status: stopped``;
  a missing container fails (exit 255) with
  ``Configuration file 'nodes/<node>/lxc/<vmid>.conf' does not exist``.
* ``pct list`` prints a header and one ``<vmid> <status> <lock> <name>`` row a container of
  the node (the lock empty when there is none).
* ``pct config <vmid>`` prints ``key: value`` lines, raw ``lxc.*`` entries last,
  ``description`` percent-encoded, pending changes merged in.
* The config file has the main section first, then optional ``[pve:pending]`` and
  ``[<snapshot>]`` sections. ``#`` lines are the description. Raw ``lxc.*`` lines
  (``key: value`` or ``key = value``) belong to the section they are in; PVE writes
  them after the sorted options. ``pct set`` cannot write them, so they are edited here.

The parsing and planning functions are pure (text in, data out) so that they can be
tested against pct's exact outputs; ``Pct`` is the only part that runs anything.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import time
from urllib.parse import unquote

from ansible_collections.eagle3.extraction.plugins.module_utils import command
from ansible_collections.eagle3.extraction.plugins.module_utils.pct_formats import SHM_SIZE_RE

# ---------------------------------------------------------------------------
# pct outputs

STATUS_RE = re.compile(r'status: (running|stopped)\n?')
MISSING_RE = re.compile(r"Configuration file '[^']*/lxc/(\d+)\.conf' does not exist")
CONFIG_OUTPUT_RE = re.compile(r'^([a-z][a-z0-9_\-.]*): ?(.*)$')


class PctOutputError(ValueError):
    """pct printed something this module does not know how to read."""


def parse_status_lines(stdout):
    """``pct status <vmid> [--verbose]`` output as a dict of its ``key: value`` lines.

    Plain ``pct status`` prints exactly ``status: running`` or ``status: stopped``;
    ``--verbose`` adds ``pid: <host pid of the container's init>`` and resource lines.
    Raises PctOutputError unless there is a ``status`` of running or stopped.
    """
    values = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(':')
        if sep:
            values[key.strip()] = value.strip()
    if values.get('status') not in ('running', 'stopped'):
        raise PctOutputError('unexpected output of pct status: %r' % stdout)
    return values


def parse_status(stdout):
    """``pct status <vmid>`` output -> ``running`` or ``stopped``."""
    if not STATUS_RE.fullmatch(stdout):
        raise PctOutputError('unexpected output of pct status: %r' % stdout)
    return parse_status_lines(stdout)['status']


def parse_list(stdout):
    """``pct list`` output -> ``{vmid: {'status': ..., 'lock': ..., 'name': ...}}`` (vmid an int).

    pct prints a header (``VMID Status Lock Name``) and one row a container of this node, the lock
    column empty when there is no lock; a node without containers prints nothing. Raises
    PctOutputError on a row that is not ``<vmid> <status> [<lock>] <name>``.
    """
    containers = {}
    for line in stdout.splitlines():
        words = line.split()
        if not words or words[0] == 'VMID':
            continue
        if not words[0].isdigit() or len(words) not in (2, 3, 4):
            raise PctOutputError('unexpected line in the output of pct list: %r' % line)
        lock = words[2] if len(words) == 4 else ''
        name = words[-1] if len(words) > 2 else ''
        containers[int(words[0])] = {'status': words[1], 'lock': lock, 'name': name}
    return containers


def is_missing_container(stderr, vmid):
    """True when pct failed because container ``vmid`` has no config on this node."""
    match = MISSING_RE.search(stderr or '')
    return bool(match) and int(match.group(1)) == int(vmid)


def parse_config_output(stdout):
    """``pct config <vmid>`` output -> (options dict, raw lxc list of (key, value)).

    ``description`` is decoded (pct prints it percent-encoded on one line).
    """
    options = {}
    raw_lxc = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        match = CONFIG_OUTPUT_RE.match(line)
        if not match:
            raise PctOutputError('unexpected line in pct config output: %r' % line)
        key, value = match.group(1), match.group(2)
        if key.startswith('lxc.'):
            raw_lxc.append((key, value))
        elif key == 'description':
            options[key] = unquote(value)
        else:
            options[key] = value
    return options, raw_lxc


# ---------------------------------------------------------------------------
# The config file /etc/pve/lxc/<vmid>.conf

SECTION_RE = re.compile(r'^\[([a-z][a-z0-9_\-]+|pve:pending)\]\s*$', re.IGNORECASE)
RAW_LXC_RE = re.compile(r'^(lxc\.[a-z0-9_\-.]+)(?::|\s*=)\s*(.*?)\s*$')
OPTION_RE = re.compile(r'^([a-z][a-z_]*\d*):\s*(.+?)\s*$')
PENDING = 'pve:pending'


class ConfigFile:
    """One parsed /etc/pve/lxc/<vmid>.conf.

    ``main`` and ``pending`` map option names to values (``pending`` may hold
    ``delete``); ``raw_lxc`` lists the main section's raw lines as (key, value);
    ``lines`` keeps the text so raw edits can leave every other byte alone.
    """

    def __init__(self, text):
        self.text = text
        self.lines = text.splitlines()
        self.description_lines = []
        self.main = {}
        self.raw_lxc = []
        self.pending = {}
        self.main_end = len(self.lines)  # index of the first [section] header
        self.tail = ''  # the text from the first snapshot section on
        section = None
        for index, line in enumerate(self.lines):
            if not line.strip():
                continue
            header = SECTION_RE.match(line)
            if header:
                if section is None:
                    self.main_end = index
                section = header.group(1).lower()
                if section != PENDING and not self.tail:
                    self.tail = '\n'.join(self.lines[index:]) + '\n'
                continue
            if section is None:
                self._parse_main_line(line)
            elif section == PENDING:
                self._parse_pending_line(line)

    def _parse_main_line(self, line):
        if line.startswith('#'):
            self.description_lines.append(line)
            return
        raw = RAW_LXC_RE.match(line)
        if raw:
            self.raw_lxc.append((raw.group(1), raw.group(2)))
            return
        option = OPTION_RE.match(line)
        if option:
            self.main[option.group(1)] = option.group(2)

    def _parse_pending_line(self, line):
        option = OPTION_RE.match(line)
        if option:
            self.pending[option.group(1)] = option.group(2)

    @property
    def pending_delete(self):
        """Options [pve:pending] deletes at the next start (``!`` marks a forced delete)."""
        value = self.pending.get('delete', '')
        return [item.lstrip('!') for item in value.split(',') if item.strip('! ')]

    def effective(self):
        """The options as they will be after the next start: main with pending applied."""
        merged = dict(self.main)
        merged.update((k, v) for k, v in self.pending.items() if k != 'delete')
        for key in self.pending_delete:
            merged.pop(key, None)
        return merged

    @property
    def lock(self):
        return self.main.get('lock')


def render_config(description_lines, main, raw_lxc, pending, tail):
    """The file as pve-container's write_pct_config writes it (sorted keys, raw lines last)."""
    out = list(description_lines)
    out.extend('%s: %s' % (key, main[key]) for key in sorted(main))
    out.extend('%s: %s' % (key, value) for key, value in raw_lxc)
    text = '\n'.join(out) + '\n' if out else ''
    if pending:
        text += '\n[%s]\n' % PENDING
        text += ''.join('%s: %s\n' % (key, pending[key]) for key in sorted(pending))
    if tail:
        text += '\n' + tail
    return text


def raw_line(key, value):
    return '%s: %s' % (key, value)


def parse_raw_line(line):
    """``lxc.key: value`` or ``lxc.key = value`` -> (key, value); ValueError otherwise."""
    if '\n' in line or '\r' in line:
        raise ValueError('a raw lxc line must be one line: %r' % line)
    match = RAW_LXC_RE.match(line.strip())
    if not match or not match.group(2):
        raise ValueError("not a raw lxc line 'lxc.<key>: <value>': %r" % line)
    return match.group(1), match.group(2)


def owned_raw_lines(keys=(), shm=False):
    """A predicate for plan_raw_lxc: raw lines of these keys, and the /dev/shm mount if ``shm``."""
    keys = frozenset(keys)

    def owned(line):
        return line[0] in keys or (shm and is_shm_mount_entry(line))
    return owned


def plan_raw_lxc(existing, wanted, owned):
    """Decide which raw lines to keep and which to add.

    ``existing`` and ``wanted`` are lists of (key, value); ``owned(line)`` says whether
    a line is ours (see owned_raw_lines). An owned line stays only while it is wanted
    (each wanted line keeps one existing copy); other lines are never touched.
    Returns (keep flags, one per existing line; lines to append).
    """
    remaining = list(wanted)
    keep = []
    for line in existing:
        if line in remaining:
            remaining.remove(line)
            keep.append(True)
        else:
            keep.append(not owned(line))
    return keep, remaining


def edit_raw_lxc(text, wanted, owned):
    """Apply plan_raw_lxc to the main section of ``text``; every other byte stays.

    Returns (new text, removed lines, added lines) with lines as (key, value).
    """
    conf = ConfigFile(text)
    keep, add = plan_raw_lxc(conf.raw_lxc, wanted, owned)
    removed = [line for line, kept in zip(conf.raw_lxc, keep) if not kept]
    if not removed and not add:
        return text, [], []
    lines = conf.lines
    main, rest = lines[:conf.main_end], lines[conf.main_end:]
    new_main = []
    raw_index = 0
    for line in main:
        if line.strip() and not line.startswith('#') and RAW_LXC_RE.match(line):
            raw_index += 1
            if not keep[raw_index - 1]:
                continue
        new_main.append(line)
    # new lines go after the last line of the main section, before the blank line
    # that separates it from [pve:pending] or a snapshot
    end = len(new_main)
    while end and not new_main[end - 1].strip():
        end -= 1
    new_main[end:end] = [raw_line(k, v) for k, v in add]
    new_text = '\n'.join(new_main + rest)
    if new_main + rest:
        new_text += '\n'
    return new_text, removed, add


# ---------------------------------------------------------------------------
# Property strings: net0, dev0, features

NET_BOOLEANS = ('firewall', 'link_down')
DEVICE_BOOLEANS = ('deny-write',)
FEATURE_KEYS = ('force_rw_sys', 'fuse', 'keyctl', 'mknod', 'mount', 'nesting')
FEATURE_BOOLEANS = ('force_rw_sys', 'fuse', 'keyctl', 'mknod', 'nesting')
TRUE_WORDS = ('1', 'on', 'yes', 'true')
FALSE_WORDS = ('0', 'off', 'no', 'false')


def normalize_bool(value):
    """PVE's boolean words (1/0, on/off, yes/no, true/false) and Python bools -> '1'/'0'."""
    if isinstance(value, bool):
        return '1' if value else '0'
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return '1'
    if word in FALSE_WORDS:
        return '0'
    raise ValueError("not a boolean: %r" % (value,))


def parse_property_string(value, default_key=None):
    """``a=1,b=2`` -> {'a': '1', 'b': '2'}; a bare first item is ``default_key``'s value."""
    result = {}
    for item in value.split(','):
        item = item.strip()
        if not item:
            continue
        if '=' in item:
            key, val = item.split('=', 1)
            result[key.strip()] = val.strip()
        elif default_key and default_key not in result:
            result[default_key] = item
        else:
            raise ValueError("'%s' in %r is not key=value" % (item, value))
    return result


def format_property_string(data, default_key=None, required=()):
    """As PVE::JSONSchema::print_property_string: default key bare, then required, then sorted."""
    items = []
    if default_key and default_key in data:
        items.append(str(data[default_key]))
    keys = [k for k in sorted(data) if k in required and k != default_key]
    keys += [k for k in sorted(data) if k not in required and k != default_key]
    items.extend('%s=%s' % (key, data[key]) for key in keys)
    return ','.join(items)


def _with_booleans(data, boolean_keys):
    out = dict(data)
    for key in boolean_keys:
        if key in out:
            out[key] = normalize_bool(out[key])
    return out


def normalize_net(value):
    """A netN value (string or dict) -> dict of strings, booleans as 1/0, no ``type``."""
    data = parse_property_string(value) if isinstance(value, str) else \
        dict((str(k), v if isinstance(v, bool) else str(v)) for k, v in value.items())
    data = _with_booleans(data, NET_BOOLEANS)
    data.pop('type', None)  # PVE always adds type=veth
    return data


def format_net(data):
    return format_property_string(data, required=('name',))


def normalize_device(value):
    """A devN value -> dict; a bare path is ``path``."""
    data = parse_property_string(value, default_key='path')
    if 'path' not in data:
        raise ValueError('device %r has no path' % value)
    return _with_booleans(data, DEVICE_BOOLEANS)


def format_device(data):
    return format_property_string(data, default_key='path')


def normalize_features(value):
    """``features`` as a dict or a property string -> dict of strings (booleans 1/0)."""
    if isinstance(value, str):
        data = parse_property_string(value)
    else:
        data = dict((str(k), v) for k, v in value.items())
    unknown = sorted(set(data) - set(FEATURE_KEYS))
    if unknown:
        raise ValueError('unknown feature(s) %s; allowed: %s' % (', '.join(unknown), ', '.join(FEATURE_KEYS)))
    data = _with_booleans(data, FEATURE_BOOLEANS)
    return dict((k, str(v)) for k, v in data.items())


def format_features(data):
    return format_property_string(data)


# ---------------------------------------------------------------------------
# Planning: wanted state vs the config file

# pve-container's $LXC_FASTPLUG_OPTIONS: written to the config at once, even while running
FASTPLUG_OPTIONS = frozenset(('description', 'onboot', 'startup', 'protection', 'hostname',
                              'hookscript', 'cores', 'tags', 'lock'))
# vmconfig_hotplug_pending applies these to a running container (cgroup limits, veth)
HOTPLUG_OPTIONS = frozenset(('cpulimit', 'cpuunits', 'memory', 'swap'))
# options whose deletion a running container applies at once
HOTPLUG_DELETE = frozenset(('swap', 'cpulimit', 'cpuunits'))
# written at once, but the container only sees them when it next starts
READ_AT_START = {'hostname': 'the container gets its hostname when it starts'}

DEVICE_KEY_RE = re.compile(r'^dev(\d+)\Z')
NET_KEY_RE = re.compile(r'^net(\d+)\Z')
MAX_DEVICES = 256


class Plan:
    """What to change: ``pct set`` options, deletions and raw lxc lines, and why a restart is due."""

    def __init__(self):
        self.set = {}
        self.delete = []
        self.raw_removed = []
        self.raw_added = []
        self.restart_reasons = []

    @property
    def options_changed(self):
        return bool(self.set or self.delete)

    @property
    def changed(self):
        return bool(self.set or self.delete or self.raw_removed or self.raw_added)

    def as_dict(self):
        return {
            'set': dict(self.set),
            'delete': list(self.delete),
            'raw_lxc_added': [raw_line(k, v) for k, v in self.raw_added],
            'raw_lxc_removed': [raw_line(k, v) for k, v in self.raw_removed],
        }


def applies_while_running(key, main, deleting=False):
    """Does ``pct set`` on a running container write this to the main section at once?

    pve-container's vmconfig_hotplug_pending: fast-plug options, cgroup limits, veths,
    and a new devN/mpN at a free index; anything else waits in [pve:pending].
    """
    if deleting:
        return key in FASTPLUG_OPTIONS or key in HOTPLUG_DELETE or bool(NET_KEY_RE.match(key)) \
            or key.startswith('unused')
    if key in FASTPLUG_OPTIONS or key in HOTPLUG_OPTIONS or NET_KEY_RE.match(key):
        return True
    if DEVICE_KEY_RE.match(key) or re.match(r'^mp\d+$', key):
        return key not in main  # hot-plugged only onto a free index
    return False


def _plan_scalars(plan, effective, wanted):
    for key in sorted(wanted):
        value = wanted[key]
        if value is None:
            continue
        if key == 'onboot':
            value = normalize_bool(value)
            current = effective.get(key)
            try:
                current = normalize_bool(current) if current is not None else None
            except ValueError:
                pass
        else:
            value = str(value)
            current = effective.get(key)
        if current != value:
            plan.set[key] = value


def _plan_net(plan, effective, wanted_net):
    for key in sorted(wanted_net, key=lambda k: int(NET_KEY_RE.match(k).group(1))):
        target = normalize_net(wanted_net[key])
        current = normalize_net(effective[key]) if key in effective else None
        if current is not None and 'hwaddr' not in target and 'hwaddr' in current:
            target['hwaddr'] = current['hwaddr']  # keep the MAC PVE made up at creation
        if current != target:
            plan.set[key] = format_net(target)


def _plan_features(plan, effective, wanted_features):
    target = normalize_features(wanted_features)
    current = normalize_features(effective['features']) if effective.get('features') else {}
    if current != target:
        if target:
            plan.set['features'] = format_features(target)
        else:
            plan.delete.append('features')


def _device_index(key):
    return int(DEVICE_KEY_RE.match(key).group(1))


def _plan_devices(plan, conf, effective, wanted_devices):
    """devN as a set: keep each entry already there, delete the rest, add new ones at free indexes.

    A freed index is not reused in the same run: on a running container a new
    device at a free index is hot-plugged, one over an existing index waits for a restart.
    """
    remaining = [normalize_device(value) for value in wanted_devices]
    current_keys = sorted((k for k in effective if DEVICE_KEY_RE.match(k)), key=_device_index)
    for key in current_keys:
        device = normalize_device(effective[key])
        if device in remaining:
            remaining.remove(device)
        else:
            plan.delete.append(key)
    used = set(_device_index(k) for k in list(effective) + list(conf.main) + list(conf.pending)
               if DEVICE_KEY_RE.match(k))
    index = 0
    for device in remaining:
        while index in used:
            index += 1
        if index >= MAX_DEVICES:
            raise ValueError('no free devN index left (PVE allows dev0 to dev%d)' % (MAX_DEVICES - 1))
        plan.set['dev%d' % index] = format_device(device)
        used.add(index)


def plan_changes(conf, wanted, running):
    """Compare ``wanted`` with a ConfigFile (None: the container does not exist yet).

    ``wanted`` keys: scalars (hostname, cores, memory, swap, onboot: None = unmanaged),
    net (dict netN -> value), features (dict or None), devices (list or None),
    raw_lxc (list of (key, value)), raw_owned (predicate, see owned_raw_lines).
    """
    conf = conf if conf is not None else ConfigFile('')
    plan = Plan()
    effective = conf.effective()
    _plan_scalars(plan, effective, dict((k, wanted.get(k)) for k in
                                        ('hostname', 'cores', 'memory', 'swap', 'onboot')))
    if wanted.get('net'):
        _plan_net(plan, effective, wanted['net'])
    if wanted.get('features') is not None:
        _plan_features(plan, effective, wanted['features'])
    if wanted.get('devices') is not None:
        _plan_devices(plan, conf, effective, wanted['devices'])
    plan.delete.sort()

    keep, plan.raw_added = plan_raw_lxc(conf.raw_lxc, wanted.get('raw_lxc', []),
                                        wanted.get('raw_owned', owned_raw_lines()))
    plan.raw_removed = [line for line, kept in zip(conf.raw_lxc, keep) if not kept]

    if running:
        plan.restart_reasons = restart_reasons(plan, conf)
    return plan


def restart_reasons(plan, conf):
    """Why a running container needs a restart for ``plan``, and for what already waits.

    Predicted from pve-container's hot-plug rules; after a real ``pct set``, use
    start_reasons(plan) + pending_reasons(<the file as it is now>) instead.
    """
    reasons = []
    for key in sorted(plan.set):
        if key not in READ_AT_START and not applies_while_running(key, conf.main):
            reasons.append('%s: %s (pve-container cannot hot-plug it: it waits in [pve:pending])'
                           % (key, plan.set[key]))
    for key in plan.delete:
        if not applies_while_running(key, conf.main, deleting=True):
            reasons.append('%s: delete (waits in [pve:pending])' % key)
    reasons.extend(start_reasons(plan))
    reasons.extend(pending_reasons(conf, skip=set(plan.set) | set(plan.delete)))
    return reasons


def start_reasons(plan):
    """Changes written to the file at once that the container only reads when it starts."""
    reasons = []
    for key in sorted(plan.set):
        if key in READ_AT_START:
            reasons.append('%s: %s (%s)' % (key, plan.set[key], READ_AT_START[key]))
    for key, value in plan.raw_removed:
        reasons.append('remove %s (raw lxc lines are read when the container starts)' % raw_line(key, value))
    for key, value in plan.raw_added:
        reasons.append('add %s (raw lxc lines are read when the container starts)' % raw_line(key, value))
    return reasons


def pending_reasons(conf, skip=()):
    """The [pve:pending] entries already waiting for a restart."""
    reasons = []
    for key in sorted(conf.pending):
        if key != 'delete' and key not in skip:
            reasons.append('%s: %s (waits in [pve:pending])' % (key, conf.pending[key]))
    for key in conf.pending_delete:
        if key not in skip:
            reasons.append('%s: delete (waits in [pve:pending])' % key)
    return reasons


def predict_text(conf, plan, running, wanted_raw, owned):
    """The config file after ``pct set`` and the raw edit (for check mode's diff).

    ``pct set`` rewrites the file in PVE's order; a running container keeps what it
    cannot hot-plug in [pve:pending].
    """
    text = conf.text
    if plan.options_changed:
        main = dict(conf.main)
        pending = dict(conf.pending)
        pending_delete = [k for k in conf.pending_delete if k not in plan.set]
        for key, value in plan.set.items():
            if NET_KEY_RE.match(key):
                value = format_net(dict(normalize_net(value), type='veth'))  # PVE adds type=veth
            if not running or applies_while_running(key, conf.main):
                main[key] = value
                pending.pop(key, None)
            else:
                pending[key] = value
        for key in plan.delete:
            pending.pop(key, None)
            if not running or applies_while_running(key, conf.main, deleting=True):
                main.pop(key, None)
            elif key in main and key not in pending_delete:
                pending_delete.append(key)
        pending.pop('delete', None)
        if pending_delete:
            pending['delete'] = ','.join(pending_delete)
        text = render_config(conf.description_lines, main, conf.raw_lxc, pending, conf.tail)
    text, _removed, _added = edit_raw_lxc(text, wanted_raw, owned)
    return text


# ---------------------------------------------------------------------------
# /dev/shm


def shm_mount_entry(size):
    """The raw line that mounts a tmpfs of ``size`` on the container's /dev/shm."""
    if not isinstance(size, str) or not SHM_SIZE_RE.fullmatch(size):
        raise ValueError("%r is not a tmpfs size (a number with an optional k, m, g, t or %% suffix, e.g. 64G)" % (size,))
    return ('lxc.mount.entry', 'tmpfs dev/shm tmpfs rw,nosuid,nodev,size=%s,create=dir 0 0' % size)


def is_shm_mount_entry(line):
    """Is this (key, value) an lxc.mount.entry on the container's /dev/shm?"""
    key, value = line
    fields = value.split()
    return key == 'lxc.mount.entry' and len(fields) > 1 and fields[1].strip('/') == 'dev/shm'


# ---------------------------------------------------------------------------
# Running pct and editing the file

class PctError(Exception):
    """pct exited non-zero, could not be run, or hung; the message carries pct's own stderr and exit code."""

    def __init__(self, argv, rc, stdout, stderr):
        self.argv = argv
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        shown = ' '.join(['pct'] + [str(a) for a in argv[1:]])
        detail = (stderr or '').strip() or (stdout or '').strip() or '(no output)'
        if rc is None:
            # it did not run to an exit code: the detail says why (cannot be run, timed out)
            super(PctError, self).__init__('%s failed: %s' % (shown, detail))
        else:
            super(PctError, self).__init__('%s failed with exit code %s: %s' % (shown, rc, detail))


# seconds a pct command may take (create unpacks a template, start waits for the container);
# shutdown gets its own --timeout on top
DEFAULT_PCT_TIMEOUT = 300


class Pct:
    """Runs ``pct`` as argv lists with a timeout, recording each call.

    ``run`` is command.run; tests give a fake with the same signature. A pct that cannot
    be started (a directory, not executable) or that hangs raises PctError naming the
    path or the command and its timeout.
    """

    def __init__(self, path, timeout=DEFAULT_PCT_TIMEOUT, run=command.run):
        self.path = path
        self.timeout = timeout
        self._run = run
        self.commands = []

    def run(self, *args, **kwargs):
        argv = [self.path] + [str(a) for a in args]
        self.commands.append(argv)
        timeout = kwargs.get('timeout') or self.timeout
        try:
            return self._run(argv, timeout)
        except command.CommandTimeout as exc:
            raise PctError(argv, None, '', str(exc))
        except OSError as exc:
            raise PctError(argv, None, '', 'pct_path %s cannot be run: %s' % (self.path, exc.strerror or exc))

    def check(self, *args, **kwargs):
        rc, out, err = self.run(*args, **kwargs)
        if rc != 0:
            raise PctError([self.path] + [str(a) for a in args], rc, out, err)
        return out, err

    def status(self, vmid):
        """'running', 'stopped', or None when the container does not exist on this node."""
        rc, out, err = self.run('status', vmid)
        if rc != 0:
            if is_missing_container(err, vmid):
                return None
            raise PctError([self.path, 'status', str(vmid)], rc, out, err)
        return parse_status(out)

    def status_verbose(self, vmid):
        """``pct status <vmid> --verbose`` as a dict (status, pid, ...); PctError when pct fails."""
        out, _err = self.check('status', vmid, '--verbose')
        return parse_status_lines(out)

    def config(self, vmid):
        out, err = self.check('config', vmid)
        options, raw = parse_config_output(out)
        return options, raw, err


class ConfigLock:
    """The lock pct itself takes around a config change (/run/lock/lxc/pve-config-<vmid>.lock)."""

    def __init__(self, vmid, lock_dir='/run/lock/lxc', timeout=10):
        self.path = os.path.join(lock_dir, 'pve-config-%s.lock' % vmid)
        self.lock_dir = lock_dir
        self.timeout = timeout
        self.handle = None

    def __enter__(self):
        if not os.path.isdir(self.lock_dir):
            os.makedirs(self.lock_dir)
        self.handle = open(self.path, 'a')
        deadline = time.time() + self.timeout
        while True:
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except (IOError, OSError) as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.time() > deadline:
                    self.handle.close()
                    raise OSError(exc.errno, "can't lock %s: %s" % (self.path, exc.strerror))
                time.sleep(0.1)

    def __exit__(self, *exc_info):
        self.handle.close()
        return False


def read_text(path):
    with open(path, 'r') as handle:
        return handle.read()


def write_text(path, text):
    """Write as PVE does on pmxcfs: a temporary file in the same directory, then rename."""
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'w') as handle:
        handle.write(text)
    os.rename(tmp, path)
