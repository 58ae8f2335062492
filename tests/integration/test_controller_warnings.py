"""No noise a user cannot act on: a playbook run by the controller venv prints no Python warning.

cryptography 51 deprecates DSA, which ansible-core 2.21.5's ssh-agent support imports at every start: every
playbook (every step of `make demo`) printed a CryptographyDeprecationWarning about ansible's own code. The
controller venv's pins (requirements-dev.txt, installed by lab/bootstrap/venv.sh) keep cryptography below it."""

import os
import re
import subprocess
import sys

from collection_helpers import REPO

# a Python warning as the warnings module prints it: "<file>:<line>: <Category>Warning: <message>"
PYTHON_WARNING = re.compile(r'^\S+:\d+: \w*Warning: .*$', re.M)


def test_a_playbook_run_prints_no_python_warning(tmp_path):
    playbook = tmp_path / 'one_task.yml'
    playbook.write_text('- name: One task\n  hosts: localhost\n  gather_facts: false\n  tasks:\n'
                        '    - name: Say something\n      ansible.builtin.debug:\n        msg: something\n')
    # the venv this suite runs in is the controller's (.venv): its ansible-playbook, with the checkout's
    # ansible.cfg, as `make demo` runs it; PYTHONWARNINGS unset, as a user's shell has it
    bindir = os.path.dirname(sys.executable)
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONWARNINGS'}
    env.update(PATH=bindir + os.pathsep + env['PATH'], ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'))
    result = subprocess.run([os.path.join(bindir, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                             str(playbook)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'something' in result.stdout
    assert PYTHON_WARNING.findall(result.stderr) == [], result.stderr
    assert 'CryptographyDeprecationWarning' not in result.stdout + result.stderr
