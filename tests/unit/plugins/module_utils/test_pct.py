"""pct's outputs, the container config file and the change planning (plugins/module_utils/pct.py).

The pct outputs are the exact ones of /work/shared/reference/proxmox-pct.md (read from
pve-container's source); the config files are laid out as pve-container's write_pct_config
writes them: description as '#' lines, sorted keys, raw lxc.* lines last, then
[pve:pending], then snapshots.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

from ansible_collections.eagle3.extraction.plugins.module_utils import pct

SHM_256G = ('lxc.mount.entry', 'tmpfs dev/shm tmpfs rw,nosuid,nodev,size=256G,create=dir 0 0')
SHM_128G = ('lxc.mount.entry', 'tmpfs dev/shm tmpfs rw,nosuid,nodev,size=128G,create=dir 0 0')
ALLOW_195 = ('lxc.cgroup2.devices.allow', 'c 195:* rwm')

# A GPU container as PVE writes it, with a pending change and a snapshot.
CONF_129 = """\
#GPU box%3A kimi extraction
#second line
arch: amd64
cores: 64
dev0: /dev/nvidia0
dev1: /dev/nvidia1
dev10: /dev/nvidia-caps/nvidia-cap1
dev2: /dev/nvidiactl
features: nesting=1
hostname: kimi-extract-1
memory: 1048576
net0: name=eth0,bridge=vmbr0,firewall=1,gw=192.0.2.1,hwaddr=BC:24:11:5E:0F:3A,ip=192.0.2.129/24,type=veth
onboot: 1
ostype: debian
rootfs: local-lvm:vm-129-disk-0,size=64G
swap: 0
unprivileged: 1
lxc.cgroup2.devices.allow: c 195:* rwm
lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=256G,create=dir 0 0

[pve:pending]
delete: dev10
features: keyctl=1,nesting=1

[before-upgrade]
arch: amd64
cores: 32
hostname: kimi-extract-1
memory: 524288
lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=128G,create=dir 0 0
snaptime: 1732890000
"""

# The same container once the pending change was applied: nothing waits.
CONF_129_SETTLED = CONF_129.partition('\n[pve:pending]')[0] + '\n'

# What `pct config 129` prints for it: Perl string order (dev10 before dev2), digest
# skipped, description percent-encoded on one line, pending merged, raw lines last.
PCT_CONFIG_129 = """\
arch: amd64
cores: 64
description: GPU box%3A kimi extraction%0Asecond line%0A
dev0: /dev/nvidia0
dev1: /dev/nvidia1
dev2: /dev/nvidiactl
features: keyctl=1,nesting=1
hostname: kimi-extract-1
memory: 1048576
net0: name=eth0,bridge=vmbr0,firewall=1,gw=192.0.2.1,hwaddr=BC:24:11:5E:0F:3A,ip=192.0.2.129/24,type=veth
onboot: 1
ostype: debian
rootfs: local-lvm:vm-129-disk-0,size=64G
swap: 0
unprivileged: 1
lxc.cgroup2.devices.allow: c 195:* rwm
lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=256G,create=dir 0 0
"""

# A plain stopped container as `pct create` leaves it (no raw lines, no sections).
CONF_150 = """\
arch: amd64
cores: 2
hostname: ct150
memory: 4096
net0: name=eth0,bridge=vmbr0,gw=10.200.0.1,hwaddr=BC:24:11:00:01:50,ip=10.200.0.150/24,type=veth
ostype: debian
rootfs: local:150/vm-150-disk-0.raw,size=4G
swap: 0
"""


def wanted(**kwargs):
    """A wanted dict as the module builds it; raw lines owned by key (and /dev/shm with shm=True)."""
    shm = kwargs.pop('shm', False)
    owned_keys = kwargs.pop('owned_keys', ())
    result = dict(hostname=None, cores=None, memory=None, swap=None, onboot=None, net={},
                  features=None, devices=None, raw_lxc=[])
    result.update(kwargs)
    result['raw_owned'] = pct.owned_raw_lines(owned_keys, shm=shm)
    return result


# --- pct status -------------------------------------------------------------------------

@pytest.mark.parametrize('out, status', [('status: running\n', 'running'), ('status: stopped\n', 'stopped')])
def test_status_reads_both_states(out, status):
    assert pct.parse_status(out) == status


@pytest.mark.parametrize('out', ['', 'status: paused\n', 'running\n', 'status: running\nstatus: stopped\n'])
def test_status_rejects_other_output(out):
    with pytest.raises(pct.PctOutputError):
        pct.parse_status(out)


def test_missing_container_is_recognised_for_its_own_vmid_only():
    err = "Configuration file 'nodes/pve1/lxc/150.conf' does not exist\n"
    assert pct.is_missing_container(err, 150)
    assert not pct.is_missing_container(err, 15)
    assert not pct.is_missing_container('CT 150 already running\n', 150)
    assert not pct.is_missing_container('', 150)


# --- pct config ---------------------------------------------------------------------------

def test_config_output_options_raw_lines_and_description():
    options, raw = pct.parse_config_output(PCT_CONFIG_129)
    assert options['description'] == 'GPU box: kimi extraction\nsecond line\n'
    assert options['dev2'] == '/dev/nvidiactl'
    assert options['features'] == 'keyctl=1,nesting=1'
    assert 'lxc.mount.entry' not in options
    assert raw == [ALLOW_195, SHM_256G]


def test_config_output_keeps_repeated_raw_keys_in_order():
    out = 'arch: amd64\nlxc.mount.entry: /a a none bind 0 0\nlxc.mount.entry: /b b none bind 0 0\n'
    assert pct.parse_config_output(out)[1] == [('lxc.mount.entry', '/a a none bind 0 0'),
                                               ('lxc.mount.entry', '/b b none bind 0 0')]


def test_config_output_rejects_a_line_that_is_not_key_value():
    with pytest.raises(pct.PctOutputError):
        pct.parse_config_output('arch: amd64\nWARN: something\n')


# --- the config file ----------------------------------------------------------------------

def test_config_file_sections():
    conf = pct.ConfigFile(CONF_129)
    assert conf.description_lines == ['#GPU box%3A kimi extraction', '#second line']
    assert conf.main['dev10'] == '/dev/nvidia-caps/nvidia-cap1'
    assert conf.main['memory'] == '1048576'
    # the snapshot's raw line and options are not the main section's
    assert conf.raw_lxc == [ALLOW_195, SHM_256G]
    assert conf.pending == {'delete': 'dev10', 'features': 'keyctl=1,nesting=1'}
    assert conf.tail.startswith('[before-upgrade]\n') and conf.tail.endswith('snaptime: 1732890000\n')
    assert conf.lines[conf.main_end] == '[pve:pending]'


def test_effective_config_applies_pending_values_and_deletions():
    eff = pct.ConfigFile(CONF_129).effective()
    assert eff['features'] == 'keyctl=1,nesting=1'
    assert 'dev10' not in eff
    assert 'delete' not in eff
    # the same view pct config prints (pending merged)
    options, _raw = pct.parse_config_output(PCT_CONFIG_129)
    options.pop('description')
    assert eff == options


def test_pending_forced_delete_and_lock():
    conf = pct.ConfigFile('lock: backup\nmemory: 512\n\n[pve:pending]\ndelete: !dev0,swap\n')
    assert conf.pending_delete == ['dev0', 'swap']
    assert conf.lock == 'backup'


def test_raw_line_with_equals_sign_is_a_raw_line():
    conf = pct.ConfigFile('memory: 512\nlxc.cgroup2.devices.allow = c 195:* rwm\n')
    assert conf.raw_lxc == [ALLOW_195]


def test_render_matches_pve_layout():
    conf = pct.ConfigFile(CONF_129)
    text = pct.render_config(conf.description_lines, conf.main, conf.raw_lxc, conf.pending, conf.tail)
    assert text == CONF_129


# --- raw lxc lines ------------------------------------------------------------------------

def test_shm_change_replaces_the_old_entry_and_keeps_everything_else():
    shm_64g = pct.shm_mount_entry('64G')
    new, removed, added = pct.edit_raw_lxc(CONF_129, [shm_64g], pct.owned_raw_lines(shm=True))
    assert removed == [SHM_256G]
    assert added == [shm_64g]
    expected = CONF_129.replace(
        'lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=256G,create=dir 0 0\n\n[pve:pending]',
        'lxc.mount.entry: tmpfs dev/shm tmpfs rw,nosuid,nodev,size=64G,create=dir 0 0\n\n[pve:pending]')
    assert new == expected
    # the snapshot's 128G entry is the snapshot's: untouched
    assert 'size=128G' in new
    # and a second edit changes nothing
    assert pct.edit_raw_lxc(new, [shm_64g], pct.owned_raw_lines(shm=True)) == (new, [], [])


def test_raw_lines_are_appended_to_a_file_without_sections():
    new, removed, added = pct.edit_raw_lxc(CONF_150, [ALLOW_195], pct.owned_raw_lines(['lxc.cgroup2.devices.allow']))
    assert removed == []
    assert new == CONF_150 + 'lxc.cgroup2.devices.allow: c 195:* rwm\n'


def test_owned_key_lines_not_wanted_are_removed_others_stay():
    text = CONF_150 + ('lxc.cgroup2.devices.allow: c 195:* rwm\n'
                       'lxc.cgroup2.devices.allow: c 238:* rwm\n'
                       'lxc.mount.entry: /srv/models srv/models none bind,create=dir 0 0\n')
    new, removed, added = pct.edit_raw_lxc(text, [ALLOW_195], pct.owned_raw_lines(['lxc.cgroup2.devices.allow']))
    assert removed == [('lxc.cgroup2.devices.allow', 'c 238:* rwm')]
    assert added == []
    assert new == CONF_150 + ('lxc.cgroup2.devices.allow: c 195:* rwm\n'
                              'lxc.mount.entry: /srv/models srv/models none bind,create=dir 0 0\n')


def test_raw_line_written_with_equals_counts_as_present():
    text = CONF_150 + 'lxc.cgroup2.devices.allow = c 195:* rwm\n'
    assert pct.edit_raw_lxc(text, [ALLOW_195], pct.owned_raw_lines(['lxc.cgroup2.devices.allow'])) == (text, [], [])


def test_duplicate_owned_line_is_reduced_to_one():
    text = CONF_150 + 'lxc.cgroup2.devices.allow: c 195:* rwm\n' * 2
    new, removed, _added = pct.edit_raw_lxc(text, [ALLOW_195], pct.owned_raw_lines(['lxc.cgroup2.devices.allow']))
    assert removed == [ALLOW_195]
    assert new.count('c 195:* rwm') == 1


@pytest.mark.parametrize('line', ['lxc.mount.entry', 'memory: 512', 'lxc.foo: a\nlxc.bar: b', 'lxc.Foo: 1'])
def test_bad_raw_lines_are_refused(line):
    with pytest.raises(ValueError):
        pct.parse_raw_line(line)


@pytest.mark.parametrize('size', ['64G', '64T', '512m', '50%', '1073741824'])
def test_shm_sizes_tmpfs_takes(size):
    key, value = pct.shm_mount_entry(size)
    assert key == 'lxc.mount.entry' and 'size=%s,' % size in value
    assert pct.is_shm_mount_entry((key, value))


@pytest.mark.parametrize('size', ['0', '64 G', '64GB', '-1', '', 'big', '64G\n', '\n64G', '64G\nlxc.x: y', 64])
def test_shm_sizes_tmpfs_refuses(size):
    with pytest.raises(ValueError):
        pct.shm_mount_entry(size)


def test_shm_entry_recognised_with_absolute_target_only_on_dev_shm():
    assert pct.is_shm_mount_entry(('lxc.mount.entry', 'tmpfs /dev/shm tmpfs size=1G 0 0'))
    assert not pct.is_shm_mount_entry(('lxc.mount.entry', '/dev/shm/x dev/shmx none bind 0 0'))
    assert not pct.is_shm_mount_entry(('lxc.cgroup2.devices.allow', 'c 195:* rwm'))


# --- property strings ---------------------------------------------------------------------

def test_net_is_printed_like_pve():
    data = pct.normalize_net({'ip': '10.200.0.150/24', 'bridge': 'vmbr0', 'name': 'eth0', 'firewall': True})
    assert pct.format_net(data) == 'name=eth0,bridge=vmbr0,firewall=1,ip=10.200.0.150/24'


def test_device_path_is_printed_bare_first():
    assert pct.format_device(pct.normalize_device('gid=44,path=/dev/dri/card0,mode=0660')) == \
        '/dev/dri/card0,gid=44,mode=0660'


def test_property_string_without_default_key_refuses_a_bare_item():
    with pytest.raises(ValueError):
        pct.parse_property_string('nesting,keyctl=1')


def test_unknown_feature_is_refused():
    with pytest.raises(ValueError, match='nestin'):
        pct.normalize_features({'nestin': True})


# --- planning -----------------------------------------------------------------------------

def matching_129():
    """What CONF_129 already is, given the way a user writes it."""
    return wanted(
        hostname='kimi-extract-1', cores=64, memory=1048576, swap=0, onboot=True,
        net={'net0': {'name': 'eth0', 'bridge': 'vmbr0', 'ip': '192.0.2.129/24', 'gw': '192.0.2.1',
                      'firewall': 'yes'}},
        features={'nesting': True, 'keyctl': True},
        devices=['/dev/nvidiactl', '/dev/nvidia1', '/dev/nvidia0'],
        raw_lxc=[SHM_256G, ALLOW_195], owned_keys=['lxc.cgroup2.devices.allow'], shm=True)


def test_matching_config_plans_no_change_but_the_pending_one_needs_a_restart():
    conf = pct.ConfigFile(CONF_129)
    plan = pct.plan_changes(conf, matching_129(), running=True)
    assert plan.as_dict() == {'set': {}, 'delete': [], 'raw_lxc_added': [], 'raw_lxc_removed': []}
    assert not plan.changed
    # features and the dev10 deletion already wait in [pve:pending]
    assert plan.restart_reasons == ['features: keyctl=1,nesting=1 (waits in [pve:pending])',
                                    'dev10: delete (waits in [pve:pending])']


def test_matching_config_of_a_stopped_container_needs_nothing():
    plan = pct.plan_changes(pct.ConfigFile(CONF_129), matching_129(), running=False)
    assert not plan.changed and plan.restart_reasons == []


def test_memory_and_cores_apply_to_a_running_container_without_restart():
    want = matching_129()
    want.update(memory=524288, cores=32, features={'nesting': True})
    want['devices'].append('/dev/nvidia-caps/nvidia-cap1')
    conf = pct.ConfigFile(CONF_129_SETTLED)
    plan = pct.plan_changes(conf, want, running=True)
    assert plan.set == {'cores': '32', 'memory': '524288'}
    assert plan.restart_reasons == []
    after = pct.predict_text(conf, plan, True, want['raw_lxc'], want['raw_owned'])
    assert 'memory: 524288\n' in after and '[pve:pending]' not in after


def test_feature_change_on_a_running_container_waits_in_pending():
    conf = pct.ConfigFile(CONF_150)
    want = wanted(features={'nesting': True})
    plan = pct.plan_changes(conf, want, running=True)
    assert plan.set == {'features': 'nesting=1'}
    assert plan.restart_reasons == [
        'features: nesting=1 (pve-container cannot hot-plug it: it waits in [pve:pending])']
    after = pct.predict_text(conf, plan, True, [], want['raw_owned'])
    assert after == CONF_150 + '\n[pve:pending]\nfeatures: nesting=1\n'
    # on a stopped container it is written at once
    stopped = pct.plan_changes(conf, want, running=False)
    assert stopped.restart_reasons == []
    assert pct.predict_text(conf, stopped, False, [], want['raw_owned']) == \
        CONF_150.replace('cores: 2\n', 'cores: 2\nfeatures: nesting=1\n')


def test_devices_are_a_set_new_ones_take_free_indexes_and_freed_ones_are_not_reused():
    conf = pct.ConfigFile(CONF_129_SETTLED)
    want = matching_129()
    want['features'] = {'nesting': True}
    # GPU 1 leaves, nvidia-uvm arrives
    want['devices'] = ['/dev/nvidia0', '/dev/nvidiactl', '/dev/nvidia-caps/nvidia-cap1', '/dev/nvidia-uvm']
    plan = pct.plan_changes(conf, want, running=True)
    assert plan.delete == ['dev1']
    assert plan.set == {'dev3': '/dev/nvidia-uvm'}
    # the new device is hot-plugged; the removal waits for a restart
    assert plan.restart_reasons == ['dev1: delete (waits in [pve:pending])']
    after = pct.predict_text(conf, plan, True, want['raw_lxc'], want['raw_owned'])
    assert 'dev3: /dev/nvidia-uvm\n' in after.split('[pve:pending]')[0]
    assert after.split('[pve:pending]')[1] == '\ndelete: dev1\n'


def test_device_with_other_options_is_replaced():
    conf = pct.ConfigFile(CONF_150 + 'dev0: /dev/nvidia0,gid=0\n')
    plan = pct.plan_changes(conf, wanted(devices=['/dev/nvidia0']), running=False)
    assert plan.delete == ['dev0'] and plan.set == {'dev1': '/dev/nvidia0'}


def test_empty_device_list_removes_every_dev_entry():
    plan = pct.plan_changes(pct.ConfigFile(CONF_129), wanted(devices=[]), running=False)
    assert plan.delete == ['dev0', 'dev1', 'dev2']  # dev10 is deleted already (pending)


def test_net_keeps_the_mac_pve_made_up_and_only_differences_count():
    conf = pct.ConfigFile(CONF_150)
    same = wanted(net={'net0': 'name=eth0,bridge=vmbr0,ip=10.200.0.150/24,gw=10.200.0.1'})
    assert not pct.plan_changes(conf, same, running=True).changed
    moved = wanted(net={'net0': 'name=eth0,bridge=vmbr0,ip=10.200.0.151/24,gw=10.200.0.1'})
    plan = pct.plan_changes(conf, moved, running=True)
    assert plan.set == {'net0': 'name=eth0,bridge=vmbr0,gw=10.200.0.1,hwaddr=BC:24:11:00:01:50,ip=10.200.0.151/24'}
    assert plan.restart_reasons == []  # PVE updates the veth of a running container


def test_hostname_change_is_written_but_read_at_start():
    conf = pct.ConfigFile(CONF_150)
    want = wanted(hostname='ct150b')
    plan = pct.plan_changes(conf, want, running=True)
    assert plan.set == {'hostname': 'ct150b'}
    assert plan.restart_reasons == ['hostname: ct150b (the container gets its hostname when it starts)']
    # written to the main section at once (a fast-plug option), not pending
    assert 'hostname: ct150b\n' in pct.predict_text(conf, plan, True, [], want['raw_owned'])


def test_shm_size_change_on_running_container_needs_restart_and_on_stopped_does_not():
    conf = pct.ConfigFile(CONF_150 + 'lxc.mount.entry: ' + SHM_128G[1] + '\n')
    want = wanted(raw_lxc=[SHM_256G], shm=True)
    plan = pct.plan_changes(conf, want, running=True)
    assert plan.raw_removed == [SHM_128G] and plan.raw_added == [SHM_256G]
    assert plan.restart_reasons == [
        'remove lxc.mount.entry: %s (raw lxc lines are read when the container starts)' % SHM_128G[1],
        'add lxc.mount.entry: %s (raw lxc lines are read when the container starts)' % SHM_256G[1]]
    assert pct.plan_changes(conf, want, running=False).restart_reasons == []


def test_onboot_words_and_numbers_compare_as_booleans():
    conf = pct.ConfigFile(CONF_150 + 'onboot: 1\n')
    assert not pct.plan_changes(conf, wanted(onboot=True, memory=4096, cores=2), running=True).changed
    assert pct.plan_changes(conf, wanted(onboot=False), running=True).set == {'onboot': '0'}


def test_creation_plan_sets_everything_and_predicts_the_file():
    want = wanted(hostname='ct150', cores=2, memory=2048, swap=0, onboot=False,
                  net={'net0': {'name': 'eth0', 'bridge': 'vmbr0', 'ip': '10.200.0.150/24', 'gw': '10.200.0.1'}},
                  features={'nesting': True}, devices=['/dev/null'], raw_lxc=[SHM_128G], shm=True)
    plan = pct.plan_changes(None, want, running=False)
    assert plan.set == {'cores': '2', 'dev0': '/dev/null', 'features': 'nesting=1', 'hostname': 'ct150',
                        'memory': '2048', 'net0': 'name=eth0,bridge=vmbr0,gw=10.200.0.1,ip=10.200.0.150/24',
                        'onboot': '0', 'swap': '0'}
    text = pct.predict_text(pct.ConfigFile(''), plan, False, want['raw_lxc'], want['raw_owned'])
    assert text == ('cores: 2\ndev0: /dev/null\nfeatures: nesting=1\nhostname: ct150\nmemory: 2048\n'
                    'net0: name=eth0,bridge=vmbr0,gw=10.200.0.1,ip=10.200.0.150/24,type=veth\n'
                    'onboot: 0\nswap: 0\nlxc.mount.entry: %s\n' % SHM_128G[1])


# --- running pct --------------------------------------------------------------------------

class FakeRun:
    """Answers like pct would (the signature of command.run), and records what was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []
        self.timeouts = []

    def __call__(self, argv, timeout):
        self.calls.append(argv)
        self.timeouts.append(timeout)
        return self.answers.pop(0)


def fake_pct(run):
    return pct.Pct('/usr/sbin/pct', run=run)


def test_pct_status_of_a_missing_container_is_none():
    module = FakeRun((255, '', "Configuration file 'nodes/pve1/lxc/150.conf' does not exist\n"))
    assert fake_pct(module).status(150) is None
    assert module.calls == [['/usr/sbin/pct', 'status', '150']]
    assert module.timeouts == [pct.DEFAULT_PCT_TIMEOUT]


def test_pct_errors_carry_pcts_own_message_and_exit_code():
    module = FakeRun((255, '', 'CT 101 already running\n'))
    with pytest.raises(pct.PctError) as caught:
        fake_pct(module).check('start', 101)
    assert str(caught.value) == 'pct start 101 failed with exit code 255: CT 101 already running'
    assert caught.value.rc == 255


def test_pct_parameter_errors_keep_every_line():
    err = ("400 Parameter verification failed.\ncores: type check ('integer') failed - got 'x'\n"
           "pct set <vmid> [OPTIONS]\n")
    with pytest.raises(pct.PctError) as caught:
        fake_pct(FakeRun((255, '', err))).check('set', 101, '--cores', 'x')
    assert str(caught.value).endswith(err.strip())


def test_a_status_error_other_than_missing_is_raised():
    module = FakeRun((255, '', 'please run as root\n'))
    with pytest.raises(pct.PctError, match='please run as root'):
        fake_pct(module).status(101)


def test_write_text_replaces_the_file(tmp_path):
    path = tmp_path / '150.conf'
    path.write_text(CONF_150)
    pct.write_text(str(path), CONF_150 + 'onboot: 1\n')
    assert path.read_text() == CONF_150 + 'onboot: 1\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['150.conf']


def test_config_lock_excludes_a_second_holder(tmp_path):
    with pct.ConfigLock(150, lock_dir=str(tmp_path)):
        with pytest.raises(OSError, match="can't lock"):
            with pct.ConfigLock(150, lock_dir=str(tmp_path), timeout=0.2):
                pass
    with pct.ConfigLock(150, lock_dir=str(tmp_path)):
        pass


def test_a_hanging_pct_fails_in_bounded_time_naming_the_command_and_timeout(tmp_path):
    hang = tmp_path / 'pct'
    hang.write_text('#!/bin/sh\ntrap "" TERM\nsleep 60\n')
    hang.chmod(0o755)
    began = time.monotonic()
    with pytest.raises(pct.PctError) as caught:
        pct.Pct(str(hang), timeout=0.5).status(101)
    assert time.monotonic() - began < 10
    assert '%s status 101' % hang in str(caught.value) and '0.5 seconds' in str(caught.value)


def test_a_pct_path_that_is_a_directory_is_named(tmp_path):
    with pytest.raises(pct.PctError, match='pct_path %s cannot be run' % tmp_path):
        pct.Pct(str(tmp_path)).status(101)


@pytest.mark.parametrize('out, status', [
    ('status: running\n', 'running'),
    ('status: stopped\n', 'stopped'),
])
def test_verbose_status_is_parsed_by_the_same_parser(out, status):
    run = FakeRun((0, out + 'pid: 4242\ncpus: 8\n', ''))
    assert fake_pct(run).status_verbose(101) == {'status': status, 'pid': '4242', 'cpus': '8'}
    assert run.calls == [['/usr/sbin/pct', 'status', '101', '--verbose']]


# ---------------------------------------------------------------------------
# pct list (pct_list, extract.yml's "is the container running")

PCT_LIST = ("VMID       Status     Lock         Name                \n"
            "101        running                 ct1                 \n"
            "102        stopped    backup       ct2                 \n"
            "1003       running    mounted      ct3                 \n")


def test_pct_list_gives_each_containers_status_lock_and_name():
    assert pct.parse_list(PCT_LIST) == {
        101: {'status': 'running', 'lock': '', 'name': 'ct1'},
        102: {'status': 'stopped', 'lock': 'backup', 'name': 'ct2'},
        1003: {'status': 'running', 'lock': 'mounted', 'name': 'ct3'},
    }


def test_a_node_without_containers_lists_nothing():
    assert pct.parse_list('') == {}


def test_an_unknown_pct_list_line_is_refused():
    with pytest.raises(pct.PctOutputError, match='pct list'):
        pct.parse_list(PCT_LIST + 'no containers here\n')
