#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pct_container
short_description: Create, configure, start, stop and destroy a Proxmox VE LXC container with pct
version_added: 0.1.0
description:
  - Runs on the Proxmox VE node that holds the container and drives only the C(pct) command line
    (as argument lists) and the container's config file C(/etc/pve/lxc/<vmid>.conf).
  - Reads C(pct status) and the config file first, compares them with the options given, and
    changes only what differs. Options left out are not managed.
  - Options go through C(pct create) and C(pct set). Raw C(lxc.*) lines, which C(pct set) cannot
    write, are edited in the main section of the config file (above the first C([section])),
    under the lock C(pct) itself takes (C(/run/lock/lxc/pve-config-<vmid>.lock)).
  - On a running container, some changes only take effect when it next starts (see O(allow_restart)).
    The module reports them in RV(restart_required) and RV(restart_reasons) and restarts
    the container only with O(state=restarted) or O(allow_restart=true).
  - Every failure of C(pct) fails the task with pct's own message and exit code.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  vmid:
    description:
      - The container's ID (100 to 999999999).
    type: raw
    required: true
  state:
    description:
      - V(present) creates the container if needed and applies the configuration; it does not start or stop it.
      - V(started) also starts it if it is stopped (C(pct start) on a running container is an error, so the status is read first).
      - V(stopped) also shuts it down (C(pct shutdown --timeout) O(timeout) C(--forceStop 1)).
      - V(restarted) applies the configuration, then shuts the container down and starts it (or starts it if it was stopped).
      - V(absent) shuts the container down if it runs and destroys it (C(pct destroy)); every other option is ignored.
    type: str
    choices: [present, started, stopped, restarted, absent]
    default: present
  ostemplate:
    description:
      - The template to create the container from, for example V(local:vztmpl/debian-12-eagle3_amd64.tar).
      - Required when the container does not exist; ignored otherwise.
    type: str
  storage:
    description:
      - The storage of the root file system at creation (C(pct create --storage)). Ignored once the container exists.
    type: str
  rootfs_size:
    description:
      - Size of the root file system in GiB at creation (C(--rootfs <storage>:<size>)); needs O(storage).
      - Left out, pct's default applies. Ignored once the container exists.
    type: raw
  unprivileged:
    description:
      - Create an unprivileged container (C(--unprivileged 1)). Ignored once the container exists
        (Proxmox cannot change it afterwards). Left out, pct's default (privileged) applies.
    type: bool
  ssh_public_keys:
    description:
      - Public keys put into root's C(authorized_keys) at creation (C(pct create --ssh-public-keys)).
        Ignored once the container exists.
    type: list
    elements: str
  hostname:
    description:
      - The container's hostname. A running container reads it only when it next starts.
    type: str
  net:
    description:
      - Network interfaces, a dict of C(netN) to a property string (V(name=eth0,bridge=vmbr0,ip=10.0.0.5/24,gw=10.0.0.1))
        or to a dict of the same keys. C(name) is required.
      - Only the interfaces listed are managed; other C(netN) entries stay.
      - An interface matches when every key given equals the configured one; the C(hwaddr) Proxmox made up stays
        unless one is given, and C(type=veth) is implied.
    type: dict
  cores:
    description:
      - Number of CPU cores (C(pct set --cores)). Applied at once, also to a running container.
    type: raw
  memory:
    description:
      - Memory limit in MiB. A running container gets it at once (a cgroup limit).
    type: raw
  swap:
    description:
      - Swap limit in MiB. A running container gets it at once.
    type: raw
  onboot:
    description:
      - Start the container when the node boots.
    type: bool
  features:
    description:
      - "Container features as a dict (V({nesting: true, keyctl: true})) or a property string (V(nesting=1,keyctl=1))."
      - Allowed keys are C(force_rw_sys), C(fuse), C(keyctl), C(mknod), C(mount), C(nesting).
      - The configured set becomes exactly this one; V({}) removes C(features).
      - A running container sees a change only after a restart.
    type: raw
  devices:
    description:
      - Device nodes of the node to pass through as C(devN) entries (Proxmox VE 8.1 and later), each a path
        (V(/dev/nvidia0)) or a property string with options (V(/dev/dri/renderD128,gid=104,mode=0660)).
      - The C(devN) entries become exactly this set, in no particular order. An entry already there keeps its index;
        a new one gets the lowest free index. V([]) removes every C(devN).
      - A running container gets a new device at once (Proxmox hot-plugs it); removing one waits for a restart.
      - Each path must be a character or block device on the node.
    type: list
    elements: str
  raw_lxc:
    description:
      - "Raw LXC lines (V(lxc.cgroup2.devices.allow: c 195:* rwm)) to have in the main section of the config file."
      - A line is ours when its key is in O(raw_lxc_owned_keys). Lines of those keys that are not listed here are
        removed; lines of other keys are never touched. Missing lines are appended after the last line of the main
        section; the order of the lines already there is kept.
      - A running container reads them only when it next starts.
    type: list
    elements: str
    default: []
  raw_lxc_owned_keys:
    description:
      - The raw keys (V(lxc.cgroup2.devices.allow)) whose lines this task owns.
      - Defaults to the keys used in O(raw_lxc). Give it explicitly to remove the last line of a key,
        for example O(raw_lxc=[]) with O(raw_lxc_owned_keys=[lxc.cgroup2.devices.allow]).
    type: list
    elements: str
  shm_size:
    description:
      - Size of a tmpfs mounted on the container's C(/dev/shm), as tmpfs takes it (V(64G), V(64T), V(512m), V(50%)),
        a whole number with an optional C(k), C(m), C(g), C(t) or C(%) suffix.
      - "Written as the raw line C(lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=<size>,create=dir 0 0),
        which replaces any other C(lxc.mount.entry) on C(dev/shm). Left out, such lines are not touched."
      - A running container gets it only when it next starts.
    type: str
  allow_restart:
    description:
      - When a change on a running container only takes effect at its next start, shut it down and start it again
        (this kills whatever runs in it). Otherwise the change is made, the container keeps running, and
        RV(restart_required) says so.
    type: bool
    default: false
  timeout:
    description:
      - Seconds C(pct shutdown) waits for the container to stop before it kills it (C(--forceStop 1)).
    type: raw
    default: 60
  command_timeout:
    description:
      - Seconds one C(pct) command may take (1 to 3600) before it is killed and the task fails naming the command;
        C(pct shutdown) gets O(timeout) seconds more.
    type: raw
    default: 300
  pct_path:
    description:
      - Path of the C(pct) program.
    type: path
    default: /usr/sbin/pct
  conf_dir:
    description:
      - Directory of this node's container config files.
    type: path
    default: /etc/pve/lxc
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Reads the status and the config file and reports the changes and the config diff; runs nothing that changes.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff is the config file before and after (in check mode, as pct would write it).
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: linux
    details: A Proxmox VE node; runs as root.
notes:
  - A running container takes these at once (pve-container's hot-plug rules), so they need no restart -
    O(cores), O(memory), O(swap), O(onboot), O(net), and new O(devices) at a free index.
  - These wait for the next start - O(features), a removed device, O(hostname) (written into the container at start),
    O(raw_lxc) and O(shm_size) (raw lines are read at start), and anything already in C([pve:pending]).
  - A raw line written while the container runs is not tracked after this task; if the container was not restarted
    then, a later run does not know it still waits. Use O(allow_restart) or restart the container yourself.
  - The module does not reorder raw lines of the same key; put lines whose order matters (nested mounts) in order yourself.
  - Every option is checked before pct runs or a file is read - no value may hold a newline or another control
    character (it would split a config line or an argument), numbers must be in range (O(cores) 1 to 8192,
    O(memory) 16 to 268435456 MiB, O(swap) 0 to 268435456 MiB, O(rootfs_size) 1 to 131072 GiB, O(timeout) 0 to
    86400), and O(hostname), O(storage), O(ostemplate) and O(ssh_public_keys) must have their Proxmox format. A bad
    value fails naming the option and the value.
requirements:
  - Proxmox VE 8.1 or later for O(devices).
seealso:
  - name: pct manual
    description: The Proxmox VE container toolkit.
    link: https://pve.proxmox.com/pve-docs/pct.1.html
"""

EXAMPLES = r"""
- name: Create a GPU container and start it
  eagle3.extraction.pct_container:
    vmid: 129
    state: started
    ostemplate: local:vztmpl/debian-12-eagle3_amd64.tar
    storage: local-lvm
    rootfs_size: 64
    unprivileged: true
    hostname: kimi-extract-1
    net:
      net0: name=eth0,bridge=vmbr0,ip=192.0.2.129/24,gw=192.0.2.1
    cores: 64
    memory: 1048576
    swap: 0
    onboot: true
    features:
      nesting: true
    devices:
      - /dev/nvidia0
      - /dev/nvidia1
      - /dev/nvidiactl
      - /dev/nvidia-uvm
      - /dev/nvidia-uvm-tools
    shm_size: 256G
    ssh_public_keys:
      - "{{ lookup('ansible.builtin.file', '~/.ssh/id_ed25519.pub') }}"
  delegate_to: pve-gpu-a

- name: Change the /dev/shm size, restarting the container if it runs
  eagle3.extraction.pct_container:
    vmid: 129
    shm_size: 128G
    allow_restart: true

- name: Manage old-style cgroup device rules and drop any that are no longer listed
  eagle3.extraction.pct_container:
    vmid: 129
    raw_lxc:
      - "lxc.cgroup2.devices.allow: c 195:* rwm"
      - "lxc.cgroup2.devices.allow: c 238:* rwm"
    raw_lxc_owned_keys:
      - lxc.cgroup2.devices.allow

- name: See what a change would do, without doing it
  eagle3.extraction.pct_container:
    vmid: 129
    memory: 524288
  check_mode: true
  diff: true
  register: plan

- name: Destroy a container
  eagle3.extraction.pct_container:
    vmid: 150
    state: absent
"""

RETURN = r"""
vmid:
  description: The container's ID.
  returned: always
  type: int
  sample: 129
status_before:
  description: The container's status when the task began.
  returned: always
  type: str
  choices: [running, stopped, absent]
  sample: running
status:
  description: The container's status at the end (in check mode, the status it would have).
  returned: always
  type: str
  choices: [running, stopped, absent]
  sample: running
config_state:
  description:
    - The fingerprint of the container's configuration file C(<conf_dir>/<vmid>.conf) when the task ends (in check mode,
      as it is, since nothing changed), the value M(eagle3.extraction.pct_list) returns in its C(config_states) and
      M(eagle3.extraction.converged_state) with O(eagle3.extraction.converged_state#module:mode=digest) for that file;
      C(extract.yml) records it for the next run's converged check.
  returned: always
  type: str
  sample: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
differs:
  description:
    - Whether the task changed (in check mode, would change) the container - the value of C(changed) - kept under
      its own name, so that a plan run with C(changed_when=false) still says whether there is anything to do.
  returned: always
  type: bool
  sample: false
created:
  description: Whether the container was (or in check mode, would be) created.
  returned: always
  type: bool
  sample: false
restarted:
  description: Whether the container was (or would be) shut down and started again.
  returned: always
  type: bool
  sample: false
restart_required:
  description:
    - Whether the container runs at the end while a change made to it only takes effect at its next start.
    - Always false when the container was restarted, is stopped or is absent.
  returned: always
  type: bool
  sample: true
restart_reasons:
  description:
    - What takes effect only at the next start of the running container, one line each (whether or not it was restarted).
  returned: always
  type: list
  elements: str
  sample:
    - "add lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=64G,create=dir 0 0 (raw lxc lines are read when the container starts)"
    - "features: nesting=1 (pve-container cannot hot-plug it: it waits in [pve:pending])"
changes:
  description: The configuration changes made (or, in check mode, to be made).
  returned: always
  type: dict
  contains:
    set:
      description: Options given to C(pct create) or C(pct set), with their values.
      type: dict
      sample: {"memory": "65536", "dev0": "/dev/nvidia0"}
    delete:
      description: Options removed with C(pct set --delete).
      type: list
      elements: str
      sample: ["dev3"]
    raw_lxc_added:
      description: Raw lines appended to the config file.
      type: list
      elements: str
      sample: ["lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=64G,create=dir 0 0"]
    raw_lxc_removed:
      description: Raw lines removed from the config file.
      type: list
      elements: str
      sample: ["lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=32G,create=dir 0 0"]
commands:
  description: The C(pct) commands that changed something, as argument lists (in check mode, those that would run).
  returned: always
  type: list
  elements: list
  sample: [["/usr/sbin/pct", "set", "129", "--memory", "65536"], ["/usr/sbin/pct", "shutdown", "129", "--timeout", "60", "--forceStop", "1"]]
config:
  description:
    - The options as C(pct config) prints them at the end (pending changes merged in, C(description) decoded),
      without raw lines. In check mode, the configuration before any change. Empty when the container does not exist.
  returned: always
  type: dict
  sample: {"arch": "amd64", "cores": "64", "dev0": "/dev/nvidia0", "hostname": "kimi-extract-1", "memory": "1048576"}
raw_lxc:
  description: The raw C(lxc.*) lines C(pct config) prints at the end, in file order (in check mode, before any change).
  returned: always
  type: list
  elements: str
  sample: ["lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=256G,create=dir 0 0"]
pending:
  description: The C([pve:pending]) section of the config file at the end (C(delete) lists pending deletions).
  returned: always
  type: dict
  sample: {"features": "nesting=1", "delete": "dev3"}
diff:
  description: The config file before and after, with C(--diff).
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: The config file's text before (empty when the container did not exist).
      type: str
    after:
      description: The config file's text after (empty once destroyed).
      type: str
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import fingerprint
from ansible_collections.eagle3.extraction.plugins.module_utils.redact import redact_text
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import (
    executable_file_error, fullmatch_error, number_errors, number_option, option_value_errors, show, vmid_error)
from ansible_collections.eagle3.extraction.plugins.module_utils.pct_formats import (
    HOSTNAME_RE, OSTEMPLATE_RE, SSH_KEY_RE, STORAGE_RE)
from ansible_collections.eagle3.extraction.plugins.module_utils.pct import (
    DEFAULT_PCT_TIMEOUT,
    ConfigFile,
    ConfigLock,
    NET_KEY_RE,
    Pct,
    PctError,
    PctOutputError,
    RAW_LXC_RE,
    edit_raw_lxc,
    is_shm_mount_entry,
    normalize_device,
    normalize_features,
    normalize_net,
    owned_raw_lines,
    parse_raw_line,
    pending_reasons,
    plan_changes,
    predict_text,
    raw_line,
    read_text,
    shm_mount_entry,
    start_reasons,
    write_text,
)

MAX_NETWORKS = 32


class InputError(ValueError):
    """A bad option value; the message names the option and what is allowed."""


# ranges of the numbers, as pve-container's schema allows them (memory and swap in MiB, sizes in GiB)
NUMBER_RANGES = {
    'cores': (1, 8192, 'cores'),
    'memory': (16, 268435456, 'MiB'),
    'swap': (0, 268435456, 'MiB'),
    'rootfs_size': (1, 131072, 'GiB'),
    'timeout': (0, 86400, 'seconds'),
    'command_timeout': (1, 3600, 'seconds'),
}


# the number options (number_option: given as the task gave them, converted by option_value_errors)
NUMBERS = dict(dict.fromkeys(NUMBER_RANGES, 'int'), vmid='int')


def option_errors(params):
    """Every message about a bad option value, each naming the option and its value.

    The numbers of ``params`` (as the task gave them) are converted in place."""
    errors = option_value_errors(params, NUMBERS)
    error = vmid_error(params['vmid'])
    if error:
        errors.append(error)
    errors.extend(number_errors(params, NUMBER_RANGES))
    for name, pattern, what in (
            ('storage', STORAGE_RE, 'a Proxmox storage id (letters, digits, - _ .), e.g. local-lvm'),
            ('hostname', HOSTNAME_RE, 'a DNS host name, e.g. kimi-extract-1'),
            ('ostemplate', OSTEMPLATE_RE, 'a template volume (<storage>:vztmpl/<file>) or an absolute path')):
        error = fullmatch_error(name, params.get(name), pattern, what)
        if error:
            errors.append(error)
    for index, key in enumerate(params.get('ssh_public_keys') or []):
        error = fullmatch_error('ssh_public_keys[%d]' % index, key.strip(), SSH_KEY_RE,
                                'one OpenSSH public key line (<type> <base64> [comment])')
        if error:
            errors.append(error)
    error = executable_file_error('pct_path', params['pct_path'])
    if error:
        errors.append(error + '; this module runs on a Proxmox VE node')
    if not os.path.isabs(params['conf_dir']):
        errors.append('conf_dir: %s is not an absolute path' % show(params['conf_dir']))
    return errors


def wanted_config(params):
    """Check the options and turn them into plan_changes' ``wanted`` dict."""
    errors = option_errors(params)
    if errors:
        raise InputError('; '.join(errors))

    wanted = dict((key, params.get(key)) for key in ('hostname', 'cores', 'memory', 'swap', 'onboot'))
    wanted['net'] = check_net(params.get('net') or {})
    wanted['features'] = check_features(params.get('features'))
    wanted['devices'] = check_devices(params.get('devices'))
    raw, owned = check_raw_lxc(params)
    wanted['raw_lxc'] = raw
    wanted['raw_owned'] = owned
    return wanted


def check_net(net):
    for key, value in net.items():
        match = NET_KEY_RE.match(key)
        if not match or int(match.group(1)) >= MAX_NETWORKS:
            raise InputError('net: %s is not an interface key; use net0 to net%d' % (show(key), MAX_NETWORKS - 1))
        if not isinstance(value, (str, dict)):
            raise InputError('net.%s: give a property string or a dict, not %r' % (key, value))
        try:
            data = normalize_net(value)
        except ValueError as exc:
            raise InputError('net.%s: %s' % (key, exc))
        if not data.get('name'):
            raise InputError('net.%s: name is required (the interface name in the container, e.g. name=eth0)' % key)
    return net


def check_features(features):
    if features is None:
        return None
    if not isinstance(features, (str, dict)):
        raise InputError('features: give a dict (nesting: true) or a property string (nesting=1), not %r' % (features,))
    try:
        normalize_features(features)
    except ValueError as exc:
        raise InputError('features: %s' % exc)
    return features


def check_devices(devices):
    if devices is None:
        return None
    for value in devices:
        try:
            path = normalize_device(value)['path']
        except ValueError as exc:
            raise InputError('devices: %s' % exc)
        if not path.startswith('/dev/'):
            raise InputError('devices: %r is not under /dev' % value)
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise InputError('devices: %s does not exist on this node' % path)
        if not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
            raise InputError('devices: %s is not a character or block device' % path)
    if len(set(normalize_device(v)['path'] for v in devices)) != len(devices):
        raise InputError('devices: a path is listed twice')
    return devices


def check_raw_lxc(params):
    raw = []
    for line in params.get('raw_lxc') or []:
        try:
            raw.append(parse_raw_line(line))
        except ValueError as exc:
            raise InputError('raw_lxc: %s' % exc)
    owned_keys = params.get('raw_lxc_owned_keys')
    if owned_keys is None:
        owned_keys = [key for key, _value in raw]
    for key in owned_keys:
        if not RAW_LXC_RE.match('%s: x' % key):
            raise InputError('raw_lxc_owned_keys: %r is not an lxc.* key' % key)
    for key, value in raw:
        if key not in owned_keys:
            raise InputError('raw_lxc: the key of %r is missing from raw_lxc_owned_keys' % raw_line(key, value))
    shm = params.get('shm_size')
    if shm is not None:
        if any(is_shm_mount_entry(line) for line in raw):
            raise InputError('raw_lxc has an lxc.mount.entry on dev/shm and shm_size is set: use one of them')
        try:
            raw.append(shm_mount_entry(shm))
        except ValueError as exc:
            raise InputError('shm_size: %s' % exc)
    return raw, owned_raw_lines(owned_keys, shm=shm is not None)


class ContainerTask:
    """One run of the module: read, plan, act (unless check mode), report."""

    def __init__(self, module, wanted):
        self.module = module
        self.params = module.params
        self.wanted = wanted
        self.vmid = module.params['vmid']
        self.check = module.check_mode
        self.pct = Pct(module.params['pct_path'], timeout=module.params['command_timeout'])
        self.conf_path = os.path.join(module.params['conf_dir'], '%d.conf' % self.vmid)
        self.changing = []  # commands that change something (run, or would run in check mode)
        self.result = dict(changed=False, vmid=self.vmid, created=False, restarted=False,
                           restart_required=False, restart_reasons=[], commands=self.changing,
                           changes=dict(set={}, delete=[], raw_lxc_added=[], raw_lxc_removed=[]),
                           config={}, raw_lxc=[], pending={})
        self.before_text = ''
        self.after_text = ''

    # -- actions ----------------------------------------------------------------

    def act(self, *args, **kwargs):
        """A pct command that changes something: recorded, and run unless in check mode."""
        argv = [self.params['pct_path']] + [str(a) for a in args]
        self.changing.append(argv)
        self.result['changed'] = True
        if not self.check:
            self.pct.check(*args, **kwargs)

    def shutdown(self):
        # pct itself waits up to timeout seconds before it kills the container: give it that on top
        self.act('shutdown', self.vmid, '--timeout', self.params['timeout'], '--forceStop', '1',
                 timeout=self.params['timeout'] + self.params['command_timeout'])

    def start(self):
        self.act('start', self.vmid)

    def edit_raw(self):
        """Rewrite the raw lines of the file as it is now (after any pct set), under pct's lock."""
        with ConfigLock(self.vmid):
            text = read_text(self.conf_path)
            lock = ConfigFile(text).lock
            if lock:
                raise InputError('CT %d is locked (%s): not editing %s' % (self.vmid, lock, self.conf_path))
            new_text, _removed, _added = edit_raw_lxc(text, self.wanted['raw_lxc'], self.wanted['raw_owned'])
            if new_text != text:
                write_text(self.conf_path, new_text)

    # -- the run ----------------------------------------------------------------

    def run(self):
        status = self.pct.status(self.vmid)
        self.result['status_before'] = status or 'absent'
        state = self.params['state']
        if state == 'absent':
            status = self.destroy(status)
        elif status is None:
            status = self.create(state)
        else:
            status = self.update(status, state)
        self.result['status'] = status
        if status != 'absent' and not self.check:
            self.after_text = read_text(self.conf_path)  # a start applies [pve:pending]
        self.report_config(status)
        if self.module._diff:
            self.result['diff'] = dict(before=self.before_text, after=self.after_text,
                                       before_header=self.conf_path, after_header=self.conf_path)
        return self.result

    def destroy(self, status):
        if status is None:
            return 'absent'
        self.before_text = read_text(self.conf_path)
        if status == 'running':
            self.shutdown()
        self.act('destroy', self.vmid)
        return 'absent'

    def create(self, state):
        if not self.params.get('ostemplate'):
            raise InputError('ostemplate is required: container %d does not exist on this node' % self.vmid)
        plan = plan_changes(None, self.wanted, running=False)
        self.record_plan(plan)
        self.result['created'] = True
        argv = ['create', self.vmid, self.params['ostemplate']]
        if self.params.get('storage'):
            argv += ['--storage', self.params['storage']]
        if self.params.get('rootfs_size') is not None:
            argv += ['--rootfs', '%s:%d' % (self.params['storage'], self.params['rootfs_size'])]
        if self.params.get('unprivileged') is not None:
            argv += ['--unprivileged', '1' if self.params['unprivileged'] else '0']
        for key in sorted(plan.set):
            argv += ['--' + key, plan.set[key]]
        keys_file = self.write_ssh_keys()
        if keys_file:
            argv += ['--ssh-public-keys', keys_file]
        self.act(*argv)
        if plan.raw_added:
            self.result['changed'] = True
            if not self.check:
                self.edit_raw()
        if self.check:
            self.after_text = predict_text(ConfigFile(''), plan, False, self.wanted['raw_lxc'],
                                           self.wanted['raw_owned'])
        else:
            self.after_text = read_text(self.conf_path)
        if state in ('started', 'restarted'):
            self.start()
            return 'running'
        return 'stopped'

    def write_ssh_keys(self):
        keys = self.params.get('ssh_public_keys')
        if not keys:
            return None
        path = os.path.join(self.module.tmpdir, 'ssh_public_keys')
        if not self.check:
            with open(path, 'w') as handle:
                handle.write(''.join(key.strip() + '\n' for key in keys))
        return path

    def update(self, status, state):
        text = read_text(self.conf_path)
        self.before_text = text
        conf = ConfigFile(text)
        running = status == 'running'
        plan = plan_changes(conf, self.wanted, running)
        self.record_plan(plan)
        if conf.lock and plan.changed:
            raise InputError('CT %d is locked (%s): not changing its configuration' % (self.vmid, conf.lock))
        if plan.options_changed:
            argv = ['set', self.vmid]
            for key in sorted(plan.set):
                argv += ['--' + key, plan.set[key]]
            if plan.delete:
                argv += ['--delete', ','.join(plan.delete)]
            self.act(*argv)
        if plan.raw_added or plan.raw_removed:
            self.result['changed'] = True
            if not self.check:
                self.edit_raw()

        if self.check:
            self.after_text = predict_text(conf, plan, running, self.wanted['raw_lxc'], self.wanted['raw_owned'])
            reasons = plan.restart_reasons
        else:
            self.after_text = read_text(self.conf_path)
            # what pct really left pending, rather than the prediction
            reasons = start_reasons(plan) + pending_reasons(ConfigFile(self.after_text)) if running else []
        self.result['restart_reasons'] = reasons

        if not running:
            if state in ('started', 'restarted'):
                self.start()
                return 'running'
            return 'stopped'
        if state == 'stopped':
            self.shutdown()
            return 'stopped'
        if state == 'restarted' or (reasons and self.params['allow_restart']):
            self.shutdown()
            self.start()
            self.result['restarted'] = True
        else:
            self.result['restart_required'] = bool(reasons)
        return 'running'

    def record_plan(self, plan):
        self.result['changes'] = plan.as_dict()
        if plan.changed:
            self.result['changed'] = True

    def report_config(self, status):
        if status == 'absent' and not self.check:
            return
        if self.check and self.result['status_before'] == 'absent':
            return  # nothing to read yet
        try:
            options, raw, err = self.pct.config(self.vmid)
        except PctOutputError as exc:  # the change is done; only the report is incomplete
            self.module.warn('CT %d: %s' % (self.vmid, exc))
            options, raw, err = {}, [], ''
        self.result['config'] = options
        self.result['raw_lxc'] = [raw_line(k, v) for k, v in raw]
        conf_text = self.after_text if not self.check else self.before_text
        self.result['pending'] = dict(ConfigFile(conf_text).pending)
        if err.strip():
            self.module.warn('pct config %d: %s' % (self.vmid, err.strip()))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vmid=number_option('int', required=True),
            state=dict(type='str', default='present',
                       choices=['present', 'started', 'stopped', 'restarted', 'absent']),
            ostemplate=dict(type='str'),
            storage=dict(type='str'),
            rootfs_size=number_option('int'),
            unprivileged=dict(type='bool'),
            ssh_public_keys=dict(type='list', elements='str', no_log=False),
            hostname=dict(type='str'),
            net=dict(type='dict'),
            cores=number_option('int'),
            memory=number_option('int'),
            swap=number_option('int'),
            onboot=dict(type='bool'),
            features=dict(type='raw'),
            devices=dict(type='list', elements='str'),
            raw_lxc=dict(type='list', elements='str', default=[]),
            raw_lxc_owned_keys=dict(type='list', elements='str', no_log=False),
            shm_size=dict(type='str'),
            allow_restart=dict(type='bool', default=False),
            timeout=number_option('int', default=60),
            command_timeout=number_option('int', default=DEFAULT_PCT_TIMEOUT),
            pct_path=dict(type='path', default='/usr/sbin/pct'),
            conf_dir=dict(type='path', default='/etc/pve/lxc'),
        ),
        # the rootfs is created as <storage>:<size>
        required_by={'rootfs_size': 'storage'},
        supports_check_mode=True,
    )
    try:
        wanted = wanted_config(module.params)
    except InputError as exc:
        module.fail_json(msg=str(exc), vmid=module.params['vmid'])
    task = ContainerTask(module, wanted)
    try:
        result = task.run()
    except PctError as exc:
        module.fail_json(msg=redact_text(str(exc)), rc=exc.rc, stdout=redact_text(exc.stdout),
                         stderr=redact_text(exc.stderr), cmd=exc.argv,
                         vmid=task.vmid, commands=task.changing, changes=task.result['changes'])
    except (InputError, PctOutputError) as exc:
        module.fail_json(msg=redact_text(str(exc)), vmid=task.vmid, commands=task.changing,
                         changes=task.result['changes'])
    except (IOError, OSError) as exc:
        module.fail_json(msg='CT %d: %s' % (task.vmid, exc), vmid=task.vmid, commands=task.changing)
    result['differs'] = bool(result['changed'])
    result['config_state'] = fingerprint({'files': [task.conf_path]})
    module.exit_json(**result)


if __name__ == '__main__':
    main()
