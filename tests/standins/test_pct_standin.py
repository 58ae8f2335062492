"""The pct stand-in against real LXC containers (needs root and lxc).

Expected bytes come from shared/reference/proxmox-pct.md and pve-container's source. One CT
(990) is created and shared by the ordered TestContainer class; a few more vmids exist only as
config files. Everything lives on a tmpfs under /tmp that the session fixture removes.
"""
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from types import SimpleNamespace

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PCT = os.path.join(REPO, "lab", "standins", "pct", "pct")
LAB = os.environ.get("LAB", "/var/lib/eagle3-lab")
NODE = socket.gethostname().split(".")[0]
TEMPLATE = "local:vztmpl/debian-12-lab_amd64.tar"
VMID = "990"
# a bridge of our own on TEST-NET-1, so the CT's network touches nothing of the host's
BRIDGE, GATEWAY, CT_IP = "pcttest0", "192.0.2.1", "192.0.2.90"
DEVFILE = "/dev/pcttest-nvidia0"  # a regular file standing in for a GPU node
HWADDR = r"BC:24:11(:[0-9A-F]{2}){3}"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="LXC needs root")


def rootfs_tarball():
    """The fleet's template (any of its versions will do): the newest one in the cache, else
    wait while lab/fleet/rootfs.sh builds one, else build it."""
    deadline = time.monotonic() + 300
    while True:
        tarballs = sorted(glob.glob(f"{LAB}/cache/rootfs-*.tar"), key=os.path.getmtime)
        if tarballs:
            return tarballs[-1]
        if not os.path.isdir(f"{LAB}/cache/rootfs.build") or time.monotonic() > deadline:
            break
        time.sleep(2)
    result = subprocess.run(["bash", os.path.join(REPO, "lab/fleet/rootfs.sh")],
                            capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, check=False, **kw)


@pytest.fixture(scope="session")
def lab():
    tarball = rootfs_tarball()
    root = tempfile.mkdtemp(prefix="pct-", dir="/tmp")  # short: it names the CTs' command sockets
    dirs = {name: os.path.join(root, name) for name in ("conf", "fake", "empty", "lxc", "tmpl")}
    try:
        # on disk, unpacking and deleting the 270 MB root file system takes seconds each
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,mode=0755", "pcttest", root], check=True)
        for path in dirs.values():
            os.mkdir(path)
        # a copy: the fleet may replace its cached template while the tests run
        shutil.copyfile(tarball, os.path.join(dirs["tmpl"], "debian-12-lab_amd64.tar"))
        env = dict(os.environ, PCT_CONF_DIR=dirs["conf"], PCT_LXC_PATH=dirs["lxc"], PCT_TEMPLATE_DIR=dirs["tmpl"])
        yield SimpleNamespace(root=root, env=env, **dirs)
    finally:
        for name in os.listdir(dirs["lxc"]) if os.path.isdir(dirs["lxc"]) else []:
            run(["lxc-stop", "-P", dirs["lxc"], "-n", name, "--kill"])
        subprocess.run(["umount", "--lazy", root], check=False)
        os.rmdir(root)


def pct(lab, *args, conf=None, input=None, env=None):
    environ = dict(lab.env, **(env or {}))
    if conf:
        environ["PCT_CONF_DIR"] = conf
    return run([PCT, *args], input=input, env=environ)


def expect(result, stdout=b"", stderr=b"", rc=0):
    assert (result.returncode, result.stderr, result.stdout) == (rc, stderr, stdout)


def config_error(vmid):
    return f"Configuration file 'nodes/{NODE}/lxc/{vmid}.conf' does not exist\n".encode()


# --- the command line -----------------------------------------------------------------------

def test_needs_root(lab):
    result = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PCT, "list"], env=lab.env)
    expect(result, stderr=b"please run as root\n", rc=255)


def test_list_without_containers_prints_nothing(lab):
    expect(pct(lab, "list", conf=lab.empty))


@pytest.mark.parametrize("args", [
    ["status", "999"], ["config", "999"], ["exec", "999", "--", "true"],
    ["set", "999", "--memory", "512"], ["destroy", "999"], ["start", "999"],
])
def test_missing_config(lab, args):
    expect(pct(lab, *args, conf=lab.empty), stderr=config_error(999), rc=255)


@pytest.mark.parametrize("args, stderr", [
    (["stop", "999"], b"CT 999 not running\n"),  # pct checks the state before the config
    (["shutdown", "999"], b"CT 999 not running\n"),
    (["reboot", "999"], b"VM 999 not running\n"),
    (["set", "999"], b"no options specified\n"),
    (["push", "999", "/etc/hostname", "/tmp/x"], b"can only push files to a running CT\n"),
])
def test_errors_before_the_config_is_read(lab, args, stderr):
    expect(pct(lab, *args, conf=lab.empty), stderr=stderr, rc=255)


USAGE_STATUS = b"pct status <vmid> [OPTIONS]\n"
USAGE_SET = b"pct set <vmid> [OPTIONS]\n"


@pytest.mark.parametrize("args, stderr", [
    (["status", "abc"], b"400 Parameter verification failed.\nvmid: type check ('integer') failed - got 'abc'\n"
                        + USAGE_STATUS),
    (["status", "99"], b"400 Parameter verification failed.\n"
                       b"vmid: invalid format - value does not look like a valid VM ID\n\n" + USAGE_STATUS),
    (["status"], b"400 not enough arguments\n" + USAGE_STATUS),
    (["status", "999", "extra"], b"400 too many arguments\n" + USAGE_STATUS),
    (["status", "999", "--bogus"], b"Unknown option: bogus\n400 unable to parse option\n" + USAGE_STATUS),
    (["status", "999", "--verbose", "maybe"], b"400 unable to parse boolean option\n" + USAGE_STATUS),
    (["list", "999"], b"400 too many arguments\npct list \n"),
    (["exec", "999", "kill", "-9", "1"],
     b"Unknown option: 9\n400 unable to parse option\npct exec <vmid> [<extra-args>] [OPTIONS]\n"),
    (["shutdown", "999", "--timeout", "-1"], b"400 Parameter verification failed.\n"
                                             b"timeout: value must have a minimum value of 0\n"
                                             b"pct shutdown <vmid> [OPTIONS]\n"),
    (["set", "999", "--memory"], b"Option memory requires an argument\n400 unable to parse option\n" + USAGE_SET),
    (["set", "999", "--memory", "abc", "--swap", "-1"],
     b"400 Parameter verification failed.\nmemory: type check ('integer') failed - got 'abc'\n"
     b"swap: value must have a minimum value of 0\n" + USAGE_SET),
    (["set", "999", "--lxc.cgroup2.devices.allow", "c 195:* rwm"],
     b"Unknown option: lxc.cgroup2.devices.allow\n400 unable to parse option\n" + USAGE_SET),
    (["set", "999", "--dev256", "/dev/null"], b"Unknown option: dev256\n400 unable to parse option\n" + USAGE_SET),
    (["set", "999", "--dev0", "/tmp/gpu0"],
     b"400 Parameter verification failed.\n"
     b"dev0: invalid format - format error\n"
     b"dev0.path: invalid format - /tmp/gpu0 is not a valid device path\n\n\n" + USAGE_SET),
    (["set", "999", "--delete", "bogus"], b"400 Parameter verification failed.\ndelete: unknown option 'bogus'\n"
                                          + USAGE_SET),
])
def test_parameter_errors(lab, args, stderr):
    expect(pct(lab, *args, conf=lab.empty), stderr=stderr, rc=255)


def test_unknown_command_prints_usage(lab):
    result = pct(lab, "frobnicate")
    assert result.returncode == 255
    assert result.stderr.startswith(b"ERROR: unknown command 'pct frobnicate'\n"
                                    b"USAGE: pct <COMMAND> [ARGS] [OPTIONS]\n\n")
    assert b"       pct exec <vmid> [<extra-args>] [OPTIONS]\n" in result.stderr


def test_call_log(lab, tmp_path):
    log = tmp_path / "calls"
    pct(lab, "status", "999", "--verbose", conf=lab.empty, env={"PCT_CALL_LOG": str(log)})
    pct(lab, "exec", "999", "--", "sh", "-c", "echo a b", conf=lab.empty, env={"PCT_CALL_LOG": str(log)})
    assert log.read_text() == "pct status 999 --verbose\npct exec 999 -- sh -c 'echo a b'\n"


# --- the config file, on CTs that exist only as config -------------------------------------------

FAKE_CONF = """#GPU box: 2x H200
#second line 100%25
arch: amd64
cores: 2
dev1: /dev/null
dev10: /dev/zero
dev2: /dev/full,gid=0
hostname: fake
memory: 2048
onboot: yes
ostype: debian
rootfs: local:995/vm-995-disk-0.raw,size=8G
swap: 0
lxc.mount.entry: tmpfs dev/shm tmpfs size=64m 0 0
lxc.apparmor.profile: unconfined

[pve:pending]
delete: onboot
memory: 4096
"""


@pytest.fixture
def fake(lab):
    """CT 995, a config file only (never started)."""
    path = os.path.join(lab.fake, "995.conf")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(FAKE_CONF)
    yield path
    os.unlink(path)


def test_config_order_encoding_and_pending(lab, fake):
    base = (b"arch: amd64\ncores: 2\n"
            b"description: GPU box%3A 2x H200%0Asecond line 100%%0A\n"
            b"dev1: /dev/null\ndev10: /dev/zero\ndev2: /dev/full,gid=0\nhostname: fake\n")
    tail = (b"ostype: debian\nrootfs: local:995/vm-995-disk-0.raw,size=8G\nswap: 0\n"
            b"lxc.mount.entry: tmpfs dev/shm tmpfs size=64m 0 0\nlxc.apparmor.profile: unconfined\n")
    expect(pct(lab, "config", "995", conf=lab.fake), stdout=base + b"memory: 4096\n" + tail)
    expect(pct(lab, "config", "995", "-current", conf=lab.fake),
           stdout=base + b"memory: 2048\nonboot: 1\n" + tail)


def test_status_and_list_of_a_stopped_ct(lab, fake):
    expect(pct(lab, "status", "995", conf=lab.fake), stdout=b"status: stopped\n")
    expect(pct(lab, "status", "995", "--verb", conf=lab.fake), stdout=(
        b"cpus: 2\ndisk: 0\ndiskread: 0\ndiskwrite: 0\nmaxdisk: 8589934592\nmaxmem: 2147483648\n"
        b"maxswap: 0\nmem: 0\nname: fake\nnetin: 0\nnetout: 0\nstatus: stopped\nswap: 0\ntype: lxc\n"
        b"uptime: 0\nvmid: 995\n"))
    with open(os.path.join(lab.fake, "1000.conf"), "w", encoding="utf-8") as fh:
        fh.write("lock: backup\nmemory: 512\n")
    try:
        expect(pct(lab, "list", conf=lab.fake), stdout=(
            b"VMID       Status     Lock         Name                \n"
            b"995        stopped                 fake                \n"
            b"1000       stopped    backup       CT1000              \n"))
        expect(pct(lab, "set", "1000", "--cores", "2", conf=lab.fake), stderr=b"CT is locked (backup)\n", rc=255)
        expect(pct(lab, "unlock", "1000", conf=lab.fake))
        expect(pct(lab, "set", "1000", "--cores", "2", conf=lab.fake))
    finally:
        os.unlink(os.path.join(lab.fake, "1000.conf"))


def test_set_on_a_stopped_ct_applies_at_once(lab, fake):
    expect(pct(lab, "set", "995", "--net0", "name=eth0,bridge=vmbr0,ip=10.0.0.5/24,gw=10.0.0.1",
               "--protection=yes", "--description", "one\ntwo", "-delete", "dev10", conf=lab.fake))
    with open(fake, encoding="utf-8") as fh:
        text = fh.read()
    assert re.fullmatch(
        r"#one\n#two\narch: amd64\ncores: 2\ndev1: /dev/null\ndev2: /dev/full,gid=0\nhostname: fake\n"
        r"memory: 2048\n"
        rf"net0: name=eth0,bridge=vmbr0,gw=10\.0\.0\.1,hwaddr={HWADDR},ip=10\.0\.0\.5/24,type=veth\n"
        r"onboot: 1\nostype: debian\nprotection: 1\nrootfs: local:995/vm-995-disk-0\.raw,size=8G\nswap: 0\n"
        r"lxc\.mount\.entry: tmpfs dev/shm tmpfs size=64m 0 0\nlxc\.apparmor\.profile: unconfined\n"
        # changes made by earlier calls stay pending: a set applies only what it names
        r"\n\[pve:pending\]\ndelete: onboot\nmemory: 4096\n", text)


def test_set_refusals(lab, fake):
    with open(fake, encoding="utf-8") as fh:
        before = fh.read()
    expect(pct(lab, "set", "995", "--delete", "memory", conf=lab.fake),
           stderr=b"unable to delete required option 'memory'\n", rc=255)
    expect(pct(lab, "set", "995", "--dev3", "/dev/pcttest-missing", conf=lab.fake),
           stderr=b"Device /dev/pcttest-missing does not exist\n", rc=255)
    expect(pct(lab, "set", "995", "--unprivileged", "1", conf=lab.fake),
           stderr=b"unable to modify read-only option: 'unprivileged'\n", rc=255)
    with open(fake, encoding="utf-8") as fh:
        assert fh.read() == before
    expect(pct(lab, "set", "995", "--delete", "tags", conf=lab.fake),
           stderr=b"cannot delete 'tags' - not set in current configuration!\n")


def test_start_failure(lab):
    path = os.path.join(lab.fake, "996.conf")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("arch: amd64\nhostname: broken\nmemory: 512\nostype: debian\n"
                 "net0: name=eth0,bridge=pcttest-nobr,type=veth\nrootfs: local:996/vm-996-disk-0.raw,size=4G\n")
    try:
        result = pct(lab, "start", "996", conf=lab.fake)
        assert (result.returncode, result.stderr) == (255, b"startup for container '996' failed\n")
        assert b'bridge interface doesn\'t exist' in result.stdout
        expect(pct(lab, "status", "996", conf=lab.fake), stdout=b"status: stopped\n")
    finally:
        os.unlink(path)


# --- a real container ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ct(lab):
    """CT 990 on a bridge of its own, with two devices and a raw lxc.* line, created and started
    through pct; torn down whatever the tests did to it."""
    subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
    key = os.path.join(lab.root, "id.pub")
    try:
        subprocess.run(["ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE], check=True)
        subprocess.run(["ip", "link", "set", BRIDGE, "up"], check=True)
        with open(DEVFILE, "w", encoding="utf-8") as fh:
            fh.write("fake gpu\n")
        with open(key, "w", encoding="utf-8") as fh:
            fh.write("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPcttestkey tests@pct\n")
        created = pct(lab, "create", VMID, TEMPLATE, "--hostname", "t990", "--memory", "256", "--swap", "0",
                      "--cores", "1", "--onboot", "1", "--ssh-public-keys", key, "--dev0", f"{DEVFILE},gid=0",
                      "--dev1", "/dev/net/tun", "--net0", f"name=eth0,bridge={BRIDGE},ip={CT_IP}/24,gw={GATEWAY}")
        with open(os.path.join(lab.conf, f"{VMID}.conf"), "a", encoding="utf-8") as fh:
            fh.write("lxc.mount.entry: tmpfs dev/shm tmpfs size=64m,nosuid,nodev,create=dir 0 0\n")
        started = pct(lab, "start", VMID)
        yield SimpleNamespace(created=created, started=started)
    finally:
        run(["lxc-stop", "-P", lab.lxc, "-n", VMID, "--kill"])
        run(["ip", "link", "del", BRIDGE])
        for path in (DEVFILE, key):
            if os.path.exists(path):
                os.unlink(path)


def in_ct(lab, script):
    result = pct(lab, "exec", VMID, "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    return result.stdout.decode()


def ct_cgroup(controller, name):
    with open(f"/sys/fs/cgroup/{controller}/lxc.payload.{VMID}/{name}", encoding="utf-8") as fh:
        return fh.read()


def init_pid(lab):
    result = run(["lxc-info", "-P", lab.lxc, "-n", VMID, "-p", "-H"], text=True)
    return int(result.stdout)


class TestContainer:
    """In order: the tests walk CT 990 through its life."""

    def test_create_and_start(self, lab, ct):
        archive = os.path.join(lab.tmpl, "debian-12-lab_amd64.tar").encode()
        assert (ct.created.returncode, ct.created.stderr) == (0, b"")
        assert re.fullmatch(rb"extracting archive '" + re.escape(archive) + rb"'\n"
                            rb"Total bytes read: \d+ \(.*\)\nDetected container architecture: amd64\n",
                            ct.created.stdout)
        expect(ct.started)

    def test_config(self, lab, ct):
        result = pct(lab, "config", VMID)
        assert (result.returncode, result.stderr) == (0, b"")
        assert re.fullmatch(
            rf"arch: amd64\ncores: 1\ndev0: {DEVFILE},gid=0\ndev1: /dev/net/tun\nhostname: t990\nmemory: 256\n"
            rf"net0: name=eth0,bridge={BRIDGE},gw={GATEWAY},hwaddr={HWADDR},ip={CT_IP}/24,type=veth\n"
            r"onboot: 1\nostype: debian\nrootfs: local:990/vm-990-disk-0\.raw,size=4G\nswap: 0\n"
            r"lxc\.mount\.entry: tmpfs dev/shm tmpfs size=64m,nosuid,nodev,create=dir 0 0\n",
            result.stdout.decode())

    def test_status_and_list(self, lab, ct):
        expect(pct(lab, "status", VMID), stdout=b"status: running\n")
        expect(pct(lab, "list"), stdout=b"VMID       Status     Lock         Name                \n"
                                        b"990        running                 t990                \n")
        result = pct(lab, "status", VMID, "--verbose")
        assert (result.returncode, result.stderr) == (0, b"")
        status = dict(line.split(": ", 1) for line in result.stdout.decode().splitlines())
        assert list(status) == sorted(status) == [
            "cpus", "disk", "diskread", "diskwrite", "maxdisk", "maxmem", "maxswap", "mem", "name", "netin",
            "netout", "pid", "pressurecpufull", "pressurecpusome", "pressureiofull", "pressureiosome",
            "pressurememoryfull", "pressurememorysome", "status", "swap", "type", "uptime", "vmid"]
        assert (status["cpus"], status["maxmem"], status["name"], status["type"]) == ("1", "268435456", "t990", "lxc")
        assert int(status["pid"]) == init_pid(lab)
        assert 0 < int(status["mem"]) <= 256 * 1024 * 1024
        assert 0 <= int(status["uptime"]) < 600 and int(status["disk"]) > 0

    def test_start_refuses_a_running_ct(self, lab, ct):
        expect(pct(lab, "start", VMID), stderr=b"CT 990 already running\n", rc=255)

    @pytest.mark.parametrize("command, rc", [
        (["sh", "-c", "exit 3"], 3),
        (["sh", "-c", "kill -9 $$"], 137),
        (["/nonexistent"], 127),
        (["/etc/passwd"], 126),  # not executable
    ])
    def test_exec_exit_codes(self, lab, ct, command, rc):
        assert pct(lab, "exec", VMID, "--", *command).returncode == rc

    def test_exec_streams(self, lab, ct):
        expect(pct(lab, "exec", VMID, "--", "sh", "-c", "cat; echo err >&2", input=b"in\n"),
               stdout=b"in\n", stderr=b"err\n")
        expect(pct(lab, "exec", VMID, "--", "sh", "-c", 'echo "$PATH $FOO"', env={"FOO": "kept"}),
               stdout=b"/sbin:/bin:/usr/sbin:/usr/bin kept\n")
        expect(pct(lab, "exec", VMID, "--keep-env", "0", "--", "sh", "-c", 'echo "[$FOO]"', env={"FOO": "kept"}),
               stdout=b"[]\n")

    def test_guest_setup(self, lab, ct):
        assert in_ct(lab, "hostname") == "t990\n"
        assert in_ct(lab, "sed -n '/BEGIN PVE/,/END PVE/p' /etc/hosts") == (
            "# --- BEGIN PVE ---\n127.0.0.1 localhost.localdomain localhost\n::1 localhost.localdomain localhost\n"
            f"{CT_IP} t990\n# --- END PVE ---\n")
        assert in_ct(lab, "stat -c %a /root/.ssh/authorized_keys; grep ssh- /root/.ssh/authorized_keys") == (
            "600\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPcttestkey tests@pct\n")
        assert in_ct(lab, "ip -4 -o addr show dev eth0 | awk '{print $4}'; ip route show default") == (
            f"{CT_IP}/24\ndefault via {GATEWAY} dev eth0 \n")
        assert run(["ip", "-o", "link", "show", "master", BRIDGE], text=True).stdout.split()[1].startswith("veth990i0@")

    def test_devices_shm_and_memory(self, lab, ct):
        assert in_ct(lab, f"cat {DEVFILE}; stat -c %F /dev/net/tun") == "fake gpu\ncharacter special file\n"
        assert "c 10:200 rw" in ct_cgroup("devices", "devices.list")
        assert in_ct(lab, "df -k --output=size /dev/shm | tail -1").strip() == "65536"
        assert ct_cgroup("memory", "memory.limit_in_bytes") == f"{256 * 1024 * 1024}\n"

    def test_push_and_pull(self, lab, ct, tmp_path):
        source, back = tmp_path / "source", tmp_path / "back"
        source.write_bytes(b"payload\n")
        expect(pct(lab, "push", VMID, str(source), "/root/pushed", "--perms", "640", "--user", "nobody"))
        assert in_ct(lab, "stat -c '%a %U' /root/pushed; cat /root/pushed") == "640 nobody\npayload\n"
        expect(pct(lab, "pull", VMID, "/root/pushed", str(back)))
        assert back.read_bytes() == b"payload\n"
        # a failure inside the task still exits 0
        expect(pct(lab, "pull", VMID, "/nonexistent", str(back)),
               stderr=b"failed to open /nonexistent: No such file or directory\n")
        expect(pct(lab, "push", VMID, str(tmp_path / "missing"), "/root/x"),
               stderr=f"failed to open {tmp_path / 'missing'} for reading\n".encode())

    def test_set_hotplugs_or_keeps_pending(self, lab, ct):
        expect(pct(lab, "set", VMID, "--memory", "300", "--hostname", "t990b", "--dev2", "/dev/fuse"))
        assert ct_cgroup("memory", "memory.limit_in_bytes") == f"{300 * 1024 * 1024}\n"
        current = pct(lab, "config", VMID, "--current").stdout
        assert b"memory: 300\n" in current and b"hostname: t990b\n" in current and b"dev2" not in current
        assert b"dev2: /dev/fuse\n" in pct(lab, "config", VMID).stdout
        with open(os.path.join(lab.conf, f"{VMID}.conf"), encoding="utf-8") as fh:
            assert fh.read().endswith("\n[pve:pending]\ndev2: /dev/fuse\n")

    def test_shutdown_that_times_out(self, lab, ct):
        # systemd ignores the halt signal while halt.target is masked
        in_ct(lab, "ln -sf /dev/null /etc/systemd/system/halt.target && systemctl daemon-reload")
        expect(pct(lab, "shutdown", VMID, "--timeout", "1"),
               stdout=b"command 'lxc-stop -n 990 --nokill --timeout 1' failed: exit code 1\n",
               stderr=b"container did not stop\n", rc=255)
        expect(pct(lab, "status", VMID), stdout=b"status: running\n")

    def test_shutdown_with_force_stop(self, lab, ct):
        expect(pct(lab, "shutdown", VMID, "--timeout", "1", "--forceStop", "1"))
        expect(pct(lab, "status", VMID), stdout=b"status: stopped\n")
        os.unlink(os.path.join(lab.lxc, VMID, "rootfs/etc/systemd/system/halt.target"))

    @pytest.mark.parametrize("args, stderr", [
        (["stop", VMID], b"CT 990 not running\n"),
        (["shutdown", VMID], b"CT 990 not running\n"),
        (["reboot", VMID], b"VM 990 not running\n"),
        (["exec", VMID, "--", "true"], b"container '990' not running!\n"),
        (["push", VMID, "/etc/hostname", "/root/x"], b"can only push files to a running CT\n"),
        (["pull", VMID, "/etc/hostname", "/tmp/x"], b"can only pull files from a running VM\n"),
    ])
    def test_stopped_ct_refuses(self, lab, ct, args, stderr):
        expect(pct(lab, *args), stderr=stderr, rc=255)

    def test_start_applies_pending(self, lab, ct):
        expect(pct(lab, "start", VMID))
        assert b"dev2: /dev/fuse\n" in pct(lab, "config", VMID, "--current").stdout
        assert in_ct(lab, "hostname; stat -c %F /dev/fuse") == "t990b\ncharacter special file\n"

    def test_reboot(self, lab, ct):
        before = init_pid(lab)
        expect(pct(lab, "reboot", VMID))
        expect(pct(lab, "status", VMID), stdout=b"status: running\n")
        assert init_pid(lab) != before

    def test_destroy_refuses_a_running_ct(self, lab, ct):
        expect(pct(lab, "destroy", VMID), stderr=b"unable to destroy CT 990 - container is running\n", rc=255)

    def test_stop(self, lab, ct):
        expect(pct(lab, "stop", VMID))
        expect(pct(lab, "status", VMID), stdout=b"status: stopped\n")

    def test_create_refusals(self, lab, ct):
        expect(pct(lab, "create", VMID, TEMPLATE), stderr=f"CT 990 already exists on node '{NODE}'\n".encode(), rc=255)
        expect(pct(lab, "create", "991", "local:vztmpl/missing.tar"),
               stderr=b"unable to create CT 991 - can't find file 'local:vztmpl/missing.tar'\n", rc=255)
        assert not os.path.exists(os.path.join(lab.conf, "991.conf"))

    def test_destroy(self, lab, ct):
        expect(pct(lab, "destroy", VMID))
        assert not os.path.exists(os.path.join(lab.conf, f"{VMID}.conf"))
        assert not os.path.exists(os.path.join(lab.lxc, VMID))
        expect(pct(lab, "list"))
