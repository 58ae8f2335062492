"""eagle3.extraction.process_reclaim against real process trees, run through `ansible -c local`.

Each test runs in its own sandbox (see conftest.py): the default patterns
(`^sglang::`, `-m sglang.launch_server`) can only ever see the test's own actors.
"""

import json
import os
import re
import subprocess

import pytest

from conftest import ACTORS, PYTHON, REPO, VENV_BIN

MODULE = 'eagle3.extraction.process_reclaim'
PORT = 8000


@pytest.fixture
def sglang_pkg(tmp_path):
    """A package named sglang whose launch_server runs the sglang-tree actor, so
    the launcher's command line is the real `python3 -m sglang.launch_server ...`."""
    pkg = tmp_path / 'pkg' / 'sglang'
    pkg.mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'launch_server.py').write_text(
        'import runpy, sys\n'
        'sys.argv = [%r, "sglang-tree"] + sys.argv[1:]\n'
        'runpy.run_path(%r, run_name="__main__")\n' % (ACTORS, ACTORS))
    return dict(os.environ, PYTHONPATH=str(pkg.parent))


def start_sglang(sandbox, env, *extra):
    return sandbox.spawn([PYTHON, '-m', 'sglang.launch_server', '--port', str(PORT), '--tp', '2'] + list(extra),
                         'sglang.json', env=env)


def killed_with(result, signal_name):
    return sorted(k['pid'] for k in result['killed'] if k['signal'] == signal_name)


def test_sglang_titled_tree_check_mode_reclaim_and_idempotence(sandbox, sglang_pkg):
    tree = start_sglang(sandbox, sglang_pkg, '--ignore-term-ranks')
    launcher = tree['launcher']
    ranks = sorted(tree['children'][k] for k in ('scheduler_TP0', 'scheduler_TP1'))
    everyone = sorted([launcher, tree['children']['detokenizer']] + ranks)
    # what /proc shows for a setproctitle-style title, as SGLang's children have
    tp0 = tree['children']['scheduler_TP0']
    assert sandbox.enter(['cat', '/proc/%d/comm' % tp0]).stdout == 'sglang::schedul\n'
    assert sandbox.enter(['cat', '/proc/%d/cmdline' % tp0]).stdout.rstrip('\0') == 'sglang::scheduler_TP0'
    assert '-m sglang.launch_server --port 8000' in sandbox.enter(['cat', '/proc/%d/cmdline' % launcher]).stdout.replace('\0', ' ')

    check, after_check, result, again = sandbox.play([
        {'module': MODULE, 'check': True},
        {'probe': ['ps', '-o', 'pid=', '-p', ','.join(str(p) for p in everyone)]},
        {'module': MODULE, 'args': {'signal_timeout': 1, 'kill_timeout': 5}},
        {'module': MODULE, 'args': {'signal_timeout': 1}},
    ])
    assert check['_rc'] == 0 and check['changed'] is True
    assert sorted(check['would_kill']) == everyone and check['killed'] == []
    # check mode killed nothing
    assert sorted(int(p) for p in after_check['stdout'].split()) == everyone
    by_pid = dict((m['pid'], m) for m in check['matched'])
    # the default patterns by their place in the list, never their text
    assert by_pid[launcher]['matched_by'] == ['match[1]']
    assert by_pid[tp0]['matched_by'] == ['match[0]'] and by_pid[tp0]['cmdline'] == 'sglang::scheduler_TP0'

    assert result['_rc'] == 0 and result['changed'] is True
    assert killed_with(result, 'SIGTERM') == everyone
    # the ranks ignore SIGTERM, the launcher and the detokenizer do not
    assert killed_with(result, 'SIGKILL') == ranks
    assert 1 <= result['elapsed'] < 2
    assert not any(sandbox.alive(p) for p in everyone)
    assert not sandbox.listening(PORT)

    assert again['_rc'] == 0 and again['changed'] is False
    assert again['matched'] == [] and again['killed'] == []


def test_orphaned_schedulers_reparented_to_init(sandbox, sglang_pkg):
    tree = start_sglang(sandbox, sglang_pkg, '--orphan')
    children = sorted(tree['children'].values())
    result = sandbox.ansible(MODULE, {'signal_timeout': 2})
    assert sorted(m['pid'] for m in result['matched']) == children
    assert set(m['ppid'] for m in result['matched']) == {1}
    assert result['_rc'] == 0 and killed_with(result, 'SIGTERM') == children
    assert not any(sandbox.alive(p) for p in children)


def test_zombie_of_a_leftover_parent_is_reaped(sandbox):
    actor = sandbox.actor('zombie', '--parent-title', 'sglang::scheduler_TP0', '--child-title', 'sglang::detokenizer')
    parent, zombie = actor['parent'], actor['zombie']
    assert sandbox.state(zombie) == 'Z'

    result, again = sandbox.play([{'module': MODULE, 'args': {'signal_timeout': 2, 'kill_timeout': 5}},
                                  {'module': MODULE, 'args': {'signal_timeout': 2}}])
    assert result['_rc'] == 0 and result['changed'] is True
    assert [(z['pid'], z['ppid'], z['action']) for z in result['zombies']] == [(zombie, parent, 'kill_parent')]
    assert result['zombies'][0]['name'] == 'sglang::detoken'
    assert result['killed'] == [{'pid': parent, 'signal': 'SIGTERM'}]
    assert result['reaped'] == [zombie]
    assert not sandbox.exists(zombie) and not sandbox.alive(parent)
    assert again['changed'] is False and again['zombies'] == []


def test_zombie_of_an_unselected_parent_is_left_and_reported(sandbox):
    actor = sandbox.actor('zombie', '--parent-title', 'keeper', '--child-title', 'sglang::detokenizer')
    parent, zombie = actor['parent'], actor['zombie']
    result = sandbox.ansible(MODULE, {'signal_timeout': 1, 'kill_timeout': 1})
    assert result['_rc'] == 0 and result['changed'] is False
    assert [(z['pid'], z['action']) for z in result['zombies']] == [(zombie, 'signal_parent')]
    assert result['killed'] == [] and result['reaped'] == []
    assert any('not reaped' in w for w in result.get('warnings', []))
    # the parent is not ours to kill: it and its zombie stay
    assert sandbox.alive(parent) and sandbox.state(zombie) == 'Z'


def test_pattern_matching_own_ancestors_does_not_kill_them(sandbox):
    token = 'reclaim-safety-token'
    decoy = sandbox.actor('hold-fd', '--path', '/dev/null', '--title', 'decoy ' + token)['pid']
    # a wrapper process whose command line has the token runs ansible-playbook;
    # the wrapper, ansible-playbook and its forked worker are ancestors of the module
    wrapper = [PYTHON, '-c', 'import subprocess, sys; sys.exit(subprocess.call(sys.argv[2:]))', token]
    # ns_init.py is PID 1 of the sandbox
    result = sandbox.ansible(MODULE, {'match': [token, 'ansible-playbook', r'ns_init\.py'], 'signal_timeout': 1},
                             wrapper=lambda argv: wrapper + argv)
    assert result['_rc'] == 0, result.get('msg')
    assert [m['pid'] for m in result['matched']] == [decoy]
    assert result['killed'] == [{'pid': decoy, 'signal': 'SIGTERM'}]
    reasons = dict((p['pid'], p['reason']) for p in result['protected'])
    assert reasons[1] == 'PID 1 (init)'
    ancestors = [p for p in result['protected'] if 'ancestor' in p['reason']]
    assert any(p['cmdline'].startswith(PYTHON + ' -c import subprocess') for p in ancestors)
    assert len([p for p in ancestors if '/ansible-playbook ' in p['cmdline']]) >= 2
    assert not sandbox.alive(decoy)


def test_host_pid1_and_kernel_threads_are_protected():
    """On the real host, in check mode only: PID 1 and kernel threads are never selected."""
    with open('/proc/1/cmdline', 'rb') as f:
        init_argv0 = f.read().split(b'\0')[0].decode()
    env = dict(os.environ, PATH=VENV_BIN + ':' + os.environ['PATH'], ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'),
               ANSIBLE_LOAD_CALLBACK_PLUGINS='1', ANSIBLE_STDOUT_CALLBACK='ansible.posix.json')
    args = {'match': ['^' + re.escape(init_argv0) + '( |$)', '^kthreadd$']}
    proc = subprocess.run(['ansible', 'localhost', '-i', 'localhost,', '-c', 'local', '-m', MODULE,
                           '-a', json.dumps(args), '--check'], capture_output=True, text=True, env=env, cwd=REPO,
                          check=False)
    result = json.loads(proc.stdout)['plays'][0]['tasks'][0]['hosts']['localhost']
    assert result['would_kill'] == [] and result['changed'] is False
    reasons = dict((p['pid'], p['reason']) for p in result['protected'])
    assert reasons[1] == 'PID 1 (init)' and reasons[2] == 'a kernel thread'


def test_exclude_spares_listed_pids(sandbox):
    spared = sandbox.actor('hold-fd', '--path', '/dev/null', '--title', 'sglang::scheduler_TP0')['pid']
    victim = sandbox.actor('hold-fd', '--path', '/dev/null', '--title', 'sglang::scheduler_TP1')['pid']
    result = sandbox.ansible(MODULE, {'exclude': [spared], 'signal_timeout': 1})
    assert result['_rc'] == 0
    assert [e['pid'] for e in result['excluded']] == [spared]
    assert result['killed'] == [{'pid': victim, 'signal': 'SIGTERM'}]
    assert sandbox.alive(spared) and not sandbox.alive(victim)
