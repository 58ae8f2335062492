"""role_input_check, a role's first task: the bad values of the role's variables, as the host
sees them, are refused naming each variable (the API key hidden) before anything changes; a
value that refers to a fact not set yet is left to later. One ansible-playbook run on localhost."""

import os
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
KEY = 'sk-never-shown-5e1b'

PLAY = [{
    'hosts': 'localhost', 'gather_facts': False,
    'vars': {
        'sglang_server_port': 0,
        'sglang_server_api_key': KEY + '\n--port 1',
        'sglang_server_flags': {'chat-template': 'a\nb'},
        'sglang_server_interconnect': 'infiniband',
        'sglang_server_shm_min_free_gib': -5,
        'sglang_server_python': '{{ ml_env_python_bin }}',
        'sglang_server_model_path': '/srv/models/m',
        'ml_env_path': '/usr',
    },
    'tasks': [
        {'name': 'Check sglang_server', 'eagle3.extraction.role_input_check': {'role': 'sglang_server'},
         'register': 'server', 'ignore_errors': True},
        {'name': 'Check ml_env', 'eagle3.extraction.role_input_check': {'role': 'ml_env'},
         'register': 'env', 'ignore_errors': True},
        {'name': 'Check sglang_patch (nothing set)', 'eagle3.extraction.role_input_check': {'role': 'sglang_patch'},
         'register': 'patch'},
        {'name': 'Show', 'ansible.builtin.copy': {
            'content': '{{ {"server": server, "env": env, "patch": patch} | to_json }}', 'dest': '{{ out }}'}},
    ],
}]


def ansible_playbook(tmp_path, name, play, *args):
    """Run play on localhost (local connection); the run and the file the play may write (`out`)."""
    playbook = tmp_path / (name + '.yml')
    playbook.write_text(yaml.safe_dump(play))
    out_file = tmp_path / (name + '.json')
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,',
                          '-c', 'local', *args, str(playbook), '-e', 'out=%s' % out_file], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    return run, out_file


def test_bad_role_values_are_refused_by_name(tmp_path):
    run, out_file = ansible_playbook(tmp_path, 'play', PLAY)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert KEY not in run.stdout + run.stderr
    results = yaml.safe_load(out_file.read_text())
    server = results['server']
    assert server['failed'] and server['unresolved'] == ['sglang_server_python']
    for name in ('sglang_server_api_key', 'sglang_server_flags', 'sglang_server_interconnect',
                 'sglang_server_port', 'sglang_server_shm_min_free_gib'):
        assert len([error for error in server['errors'] if name in error]) == 1, (name, server['errors'])
    assert len(server['errors']) == 5
    assert results['env']['failed'] and results['env']['errors'] == [
        "ml_env_path='/usr' is a system directory; give an absolute path that is not a system directory"]
    assert not results['patch'].get('failed')


ROLE_PLAY = [{
    'hosts': 'localhost', 'gather_facts': False,
    'tasks': [
        {'name': 'The preflight with the defaults and a good path',
         'ansible.builtin.include_role': {'name': 'eagle3.extraction.ml_env', 'tasks_from': 'preflight'},
         'vars': {'ml_env_path': '/opt/eagle3-test-venv'}},
        {'name': 'The preflight with bad values', 'block': [
            {'name': 'Run it', 'ansible.builtin.include_role': {'name': 'eagle3.extraction.ml_env',
                                                                'tasks_from': 'preflight'},
             'vars': {'ml_env_path': '/usr', 'ml_env_packages': ['--index-url=http://example.invalid']}},
            {'name': 'It passed', 'ansible.builtin.fail': {'msg': 'the preflight took bad values'}}],
         'rescue': [{'name': 'Keep the message', 'ansible.builtin.copy': {
             'content': '{{ {"task": ansible_failed_task.name, "msg": ansible_failed_result.msg} | to_json }}',
             'dest': '{{ out }}'}}]},
    ],
}]


def test_a_roles_preflight_starts_with_the_check(tmp_path):
    run, out_file = ansible_playbook(tmp_path, 'role', ROLE_PLAY, '-e', 'ansible_python_interpreter=/usr/bin/python3')
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    failure = yaml.safe_load(out_file.read_text())
    assert failure['task'] == 'Check every value of the role against its rules'
    assert "ml_env_path='/usr' is a system directory" in failure['msg']
    assert "ml_env_packages=['--index-url=http://example.invalid'] is refused at item 0" in failure['msg']


# Both checks only read, so they run in check mode as they do otherwise: a bad value stops a
# --check run too (an action without check mode would be skipped there, and the run pass).
CHECK_MODE_PLAY = [{
    'hosts': 'localhost', 'gather_facts': False,
    'tasks': [
        # a host's variable, as the inventory would set it (inventory_check reads hostvars)
        {'name': 'Give the host a bad port', 'ansible.builtin.set_fact': {'sglang_server_port': 0}},
        {'name': 'Check sglang_server', 'eagle3.extraction.role_input_check': {'role': 'sglang_server'},
         'register': 'role', 'ignore_errors': True},
        {'name': 'Check the inventory', 'eagle3.extraction.inventory_check': {'hosts': ['localhost'],
                                                                              'hypervisors': []},
         'register': 'inventory', 'ignore_errors': True},
        {'name': 'Both refused the port, in check mode', 'ansible.builtin.assert': {'that': [
            'role is failed', 'role is not skipped', "role.errors | select('search', 'sglang_server_port') | list | length > 0",
            'inventory is failed', 'inventory is not skipped',
            "inventory.errors | select('search', 'sglang_server_port') | list | length > 0"]}},
    ],
}]


def test_both_checks_run_in_check_mode(tmp_path):
    run, _out = ansible_playbook(tmp_path, 'check', CHECK_MODE_PLAY, '--check')
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


# A value the role's argument spec refuses: ansible-core's validation prints the spec it checked
# against, its defaults templated; the API key's default must not be the server's key rendered.
SPEC_FAILURE_PLAY = [{
    'hosts': 'localhost', 'gather_facts': False,
    'vars': {'sglang_server_api_key': KEY, 'extraction_job_concurrency': 'many'},
    'tasks': [{'name': 'The role with a value its spec refuses', 'ansible.builtin.include_role': {
        'name': 'eagle3.extraction.extraction_job'}}],
}]


def test_an_argument_spec_failure_shows_no_key(tmp_path):
    for verbosity in ([], ['-vvv']):
        run, _out = ansible_playbook(tmp_path, 'spec', SPEC_FAILURE_PLAY, *verbosity)
        assert run.returncode != 0 and 'extraction_job_concurrency' in run.stdout, run.stdout[-3000:]
        assert KEY not in run.stdout + run.stderr, verbosity
