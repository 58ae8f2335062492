"""Fixtures for the reclaim modules' integration tests.

Other people's processes run on this machine, so every test runs the module in
a sandbox: fresh PID, network and mount namespaces (`unshare --pid --net
--mount-proc`) whose PID 1 is ns_init.py. Inside it the module sees only the
test's actors and the ansible process that runs it, which lets the tests use
the real default patterns (`^sglang::`) and real well-known ports without any
risk to the rest of the machine; tearing the sandbox down kills all of it.
Actors and ansible enter the sandbox with nsenter, as real processes.
"""

import json
import os
import signal
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
ACTORS = os.path.join(HERE, 'actors.py')
VENV_BIN = os.path.join(REPO, '.venv', 'bin')
PYTHON = '/usr/bin/python3'


class Sandbox(object):
    def __init__(self, workdir):
        self.workdir = workdir
        self.unshare = subprocess.Popen(
            ['unshare', '--pid', '--net', '--mount-proc', '--kill-child', PYTHON, os.path.join(HERE, 'ns_init.py')],
            stdin=subprocess.DEVNULL, start_new_session=True)
        self.init_pid = self._wait_child(self.unshare.pid)
        self.popens = []
        # extra environment for ansible (and so for the module, with a local connection)
        self.extra_env = {}
        self.enter(['ip', 'link', 'set', 'lo', 'up'], check=True)

    @staticmethod
    def _wait_child(pid):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
                    kids = f.read().split()
            except FileNotFoundError:
                kids = []
            if kids:
                return int(kids[0])
            time.sleep(0.01)
        raise RuntimeError('sandbox init did not start')

    def nsenter(self, pid=True, net=True):
        argv = ['nsenter', '--target', str(self.init_pid)]
        if pid:
            argv += ['--pid', '--mount']
        if net:
            argv.append('--net')
        return argv + ['--']

    def enter(self, argv, check=False, **kwargs):
        return subprocess.run(self.nsenter() + argv, check=check, capture_output=True, text=True, **kwargs)

    def spawn(self, argv, ready_name, pid_ns=True, timeout=10, env=None):
        """Start an actor in the sandbox; return its ready-file contents."""
        ready = os.path.join(self.workdir, ready_name)
        proc = subprocess.Popen(self.nsenter(pid=pid_ns) + argv + ['--ready', ready],
                                stdin=subprocess.DEVNULL, env=env)
        self.popens.append(proc)
        deadline = time.monotonic() + timeout
        while not os.path.exists(ready):
            if proc.poll() not in (None, 0) or time.monotonic() > deadline:
                raise RuntimeError('actor %s did not get ready (rc=%s)' % (argv, proc.poll()))
            time.sleep(0.01)
        with open(ready) as f:
            return json.load(f)

    def spawn_line(self, argv, env=None, timeout=10):
        """Start a process in the sandbox; return its first line of output."""
        proc = subprocess.Popen(self.nsenter() + argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                env=env, text=True)
        self.popens.append(proc)
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError('%s printed nothing (rc=%s)' % (argv, proc.wait(timeout)))
        return line.strip()

    def fake_gpu_devices(self, names=('nvidia0', 'nvidia1', 'nvidiactl', 'nvidia-uvm')):
        """Give the sandbox a /dev of its own (a tmpfs, in its private mount
        namespace) with the host's basic nodes bound in and plain files at the
        NVIDIA device paths, which the stand-in nvidia-smi's holder opens."""
        hostdev = os.path.join(self.workdir, 'hostdev')
        os.mkdir(hostdev)
        script = '''set -e
mount --rbind /dev "$1"
mount -t tmpfs -o mode=755 sandbox-dev /dev
for n in null zero full random urandom tty; do touch /dev/$n; mount --bind "$1/$n" /dev/$n; done
mkdir /dev/pts /dev/shm
mount --rbind "$1/pts" /dev/pts
mount -t tmpfs sandbox-shm /dev/shm
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout; ln -s /proc/self/fd/2 /dev/stderr
shift
for n in "$@"; do touch "/dev/$n"; chmod 666 "/dev/$n"; done
'''
        self.enter(['sh', '-c', script, 'sh', hostdev] + list(names), check=True)

    def actor(self, *args, **kwargs):
        return self.spawn([PYTHON, ACTORS] + list(args), '%s-%d.json' % (args[0], len(self.popens)), **kwargs)

    def host_pid(self, ns_pid):
        """Host pid of a pid as seen in the sandbox (NSpid innermost)."""
        mine = os.readlink('/proc/%d/ns/pid' % self.init_pid)
        for name in os.listdir('/proc'):
            if not name.isdigit():
                continue
            try:
                if os.readlink('/proc/%s/ns/pid' % name) != mine:
                    continue
                with open('/proc/%s/status' % name) as f:
                    for line in f:
                        if line.startswith('NSpid:') and int(line.split()[-1]) == ns_pid:
                            return int(name)
            except OSError:
                continue
        return None

    def alive(self, ns_pid):
        """Whether a sandbox pid runs (a zombie counts as dead)."""
        out = self.enter(['cat', '/proc/%d/stat' % ns_pid]).stdout
        return bool(out) and out.rsplit(')', 1)[1].split()[0] not in ('Z', 'X')

    def exists(self, ns_pid):
        """Whether a sandbox pid exists at all (zombies included)."""
        return self.enter(['test', '-e', '/proc/%d' % ns_pid]).returncode == 0

    def state(self, ns_pid):
        out = self.enter(['cat', '/proc/%d/stat' % ns_pid]).stdout
        return out.rsplit(')', 1)[1].split()[0] if out else None

    def listening(self, port):
        """Ports listening in the sandbox, per ss (an independent reader of the kernel's tables)."""
        out = self.enter(['ss', '-H', '-ltn', 'sport = :%d' % port]).stdout
        return [line for line in out.splitlines() if line.strip()]

    def ansible(self, module, args, check=False, wrapper=None, timeout=120):
        """Run one module in the sandbox through Ansible (local connection);
        return its result (a dict; 'failed' set on failure, '_rc' the exit code)."""
        return self.play([{'module': module, 'args': args, 'check': check}], wrapper=wrapper, timeout=timeout)[0]

    def play(self, steps, wrapper=None, timeout=120):
        """Run steps as the tasks of one ansible-playbook run in the sandbox
        (one Ansible start-up for several module runs); return their results.

        A step is {'module', 'args', 'check'} or {'probe': argv}: a command whose
        stdout and rc are recorded, to look at the processes between two runs.
        Failed steps do not stop the play.
        """
        tasks = []
        for step in steps:
            if 'probe' in step:
                tasks.append({'name': 'probe', 'ansible.builtin.command': {'argv': step['probe']},
                              'changed_when': False, 'failed_when': False, 'check_mode': False})
            else:
                tasks.append({'name': step['module'], step['module']: step.get('args') or {},
                              'check_mode': bool(step.get('check')), 'ignore_errors': True})
        playbook = os.path.join(self.workdir, 'play-%d.yml' % len(os.listdir(self.workdir)))
        with open(playbook, 'w') as f:
            json.dump([{'hosts': 'localhost', 'connection': 'local', 'gather_facts': False, 'tasks': tasks}], f)
        env = dict(os.environ,
                   PATH=VENV_BIN + ':' + os.environ.get('PATH', '/usr/bin:/bin'),
                   ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'),
                   ANSIBLE_STDOUT_CALLBACK='ansible.posix.json',
                   ANSIBLE_LOCALHOST_WARNING='0',
                   ANSIBLE_INVENTORY_UNPARSED_WARNING='0',
                   **self.extra_env)
        argv = ['ansible-playbook', '-i', 'localhost,', playbook]
        if wrapper:
            argv = wrapper(argv)
        proc = subprocess.run(self.nsenter() + argv, capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=timeout, check=False)
        try:
            report = json.loads(proc.stdout)
            results = [t['hosts']['localhost'] for t in report['plays'][0]['tasks']]
        except (ValueError, KeyError, IndexError):
            raise AssertionError('ansible-playbook printed no usable JSON (rc=%s):\n%s\n%s'
                                 % (proc.returncode, proc.stdout, proc.stderr))
        if len(results) != len(steps):
            raise AssertionError('%d of %d steps ran:\n%s' % (len(results), len(steps), proc.stdout))
        for result in results:
            result['_rc'] = 0 if not result.get('failed') else 2
        return results

    def close(self):
        try:
            os.killpg(self.unshare.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.unshare.wait()
        for proc in self.popens:
            proc.kill()
            proc.wait()


@pytest.fixture
def sandbox(tmp_path):
    if os.geteuid() != 0:
        pytest.skip('the reclaim sandbox needs root (namespaces, signals)')
    box = Sandbox(str(tmp_path))
    try:
        yield box
    finally:
        box.close()


@pytest.fixture(scope='session')
def python():
    return PYTHON
