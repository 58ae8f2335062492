"""SSH host keys are checked for every inventory but the local lab fleet's.

The root ansible.cfg is what a user runs with from a checkout, production hypervisors
(reached as root) included; only the lab fleet's inventories (inventory/demo, and inventory/demo-pct,
which reaches ct4 through pve2 with paramiko) may trust their hosts, whose keys change each time
lab/fleet/up.sh remakes them.
"""

import glob
import os

import yaml
from ansible.config.manager import ConfigManager

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def test_root_ansible_cfg_checks_host_keys(monkeypatch):
    monkeypatch.delenv('ANSIBLE_HOST_KEY_CHECKING', raising=False)
    config = ConfigManager(os.path.join(REPO, 'ansible.cfg'))
    assert config.get_config_value('HOST_KEY_CHECKING') is True


def _ssh_args(inventory):
    found = {}
    for path in glob.glob(os.path.join(REPO, 'inventory', inventory, '**', '*.yml'), recursive=True):
        with open(path) as f:
            text = f.read()
        found[path] = text
    return found


def test_only_the_demo_inventory_skips_host_key_checking():
    inventories = [os.path.basename(p) for p in glob.glob(os.path.join(REPO, 'inventory', '*'))]
    assert 'demo' in inventories and 'example' in inventories
    for inventory in inventories:
        texts = _ssh_args(inventory)
        skips = [p for p, t in texts.items() if 'StrictHostKeyChecking=no' in t or 'host_key_checking' in t]
        if inventory == 'demo':
            with open(os.path.join(REPO, 'inventory', 'demo', 'group_vars', 'all.yml')) as f:
                args = yaml.safe_load(f)['ansible_ssh_common_args']
            assert 'StrictHostKeyChecking=no' in args   # the lab fleet is still reached
        elif inventory == 'demo-pct':
            # the demo's own group_vars (a link), and paramiko's switch for the pct host
            assert os.path.realpath(os.path.join(REPO, 'inventory', 'demo-pct', 'group_vars')) == \
                os.path.join(REPO, 'inventory', 'demo', 'group_vars')
            with open(os.path.join(REPO, 'inventory', 'demo-pct', 'hosts.yml')) as f:
                hosts = yaml.safe_load(f)['all']['children']['extraction_servers']['hosts']
            assert [values.get('ansible_host_key_checking') for values in hosts.values()] == [False]
        else:
            assert skips == [], '%s turns host key checking off in %s' % (inventory, skips)
