# Local replacement for ansible-test's get-pip bootstrap script (ci-files.testing.ansible.com
# cannot be reached from this machine): bootstrap the interpreter's bundled pip with
# ensurepip (in a child: ensurepip sets PIP_CONFIG_FILE=/dev/null in its own environment),
# then let that pip install what ansible-test asks for, with this machine's pip config.
# --no-setuptools/--no-wheel are get-pip's own options (ensurepip installs neither here).
import subprocess
import sys

rc = subprocess.call([sys.executable, '-m', 'ensurepip'])
if rc:
    sys.exit(rc)
args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
sys.exit(subprocess.call([sys.executable, '-m', 'pip', 'install'] + args))
