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


def _preflight_block(name, variables, tasks_from='preflight'):
    """Run the role's tasks_from with variables; keep which task failed and its message (or that it passed)."""
    return {'name': name, 'block': [
        {'name': 'Run it', 'ansible.builtin.include_role': {'name': 'eagle3.extraction.extraction_job',
                                                            'tasks_from': tasks_from}, 'vars': variables},
        {'name': 'Keep that it passed', 'ansible.builtin.set_fact': {
            'found': '{{ found | combine({"%s": {"passed": true}}) }}' % name}}],
        'rescue': [{'name': 'Keep the message', 'ansible.builtin.set_fact': {
            'found': '{{ found | combine({"%s": {"task": ansible_failed_task.name, "msg": ansible_failed_result.msg}}) }}'
                     % name}}]}


def test_the_preflight_refuses_what_is_another_s_and_takes_a_linked_dataset(tmp_path):
    """Dirs that exist and are another's (another user's 0700 dir, a root dir of another group or mode), a key file
    that is a link or another's, a unit name that is a system template (user, getty): refused by the preflight,
    which only reads, naming each variable; nothing of them changes. A dataset given as a link to its file passes."""
    nobody = 65534
    dataset = tmp_path / 'data' / 'd.jsonl'
    dataset.parent.mkdir()
    dataset.write_text('{"id": "a", "input_ids": [1], "loss_mask": [1]}\n')
    (tmp_path / 'linked.jsonl').symlink_to(dataset)
    others = tmp_path / 'others_0700'
    others.mkdir(mode=0o700)
    os.chown(others, nobody, nobody)
    group_dir = tmp_path / 'group-dir'            # like /var/log/journal: root, another group, 2755
    group_dir.mkdir()
    os.chown(group_dir, 0, nobody)
    os.chmod(group_dir, 0o2755)
    wrong_mode = tmp_path / 'wrong-mode'          # root:root, but the role would chmod it to 0700 (a log dir)
    wrong_mode.mkdir(mode=0o755)
    os.chmod(wrong_mode, 0o755)
    config = tmp_path / 'etc'
    config.mkdir(mode=0o700)
    os.chmod(config, 0o700)
    secret = tmp_path / 'secret'
    secret.write_text('not the key\n')
    (config / 'linked.key').symlink_to(secret)
    (config / 'foreign.key').write_text('someone else\n')
    os.chown(config / 'foreign.key', nobody, nobody)
    systemd = tmp_path / 'systemd'
    systemd.mkdir()
    (systemd / 'mine@.service').write_text('[Unit]\nDescription=not ours\n')
    base = {'extraction_job_dataset': str(tmp_path / 'linked.jsonl'), 'extraction_job_python': sys.executable,
            'extraction_job_install_dir': str(tmp_path / 'opt'), 'extraction_job_config_dir': str(config),
            'extraction_job_data_dir': str(tmp_path / 'var'), 'extraction_job_log_dir': str(tmp_path / 'log'),
            'extraction_job_output_root': str(tmp_path / 'srv'), 'extraction_job_systemd_dir': str(systemd),
            'extraction_job_name': 'job', 'extraction_job_shard_indexes': [0], 'extraction_job_shard_count': 1,
            'extraction_job_server_url': 'http://127.0.0.1:30000', 'extraction_job_api_key': KEY}
    cases = {
        'good': {},
        'others_dirs': {'extraction_job_data_dir': str(others), 'extraction_job_install_dir': str(group_dir),
                        'extraction_job_log_dir': str(wrong_mode)},
        'output_dir': {'extraction_job_output_root': str(tmp_path), 'extraction_job_name': 'others_0700'},
        'linked_key': {'extraction_job_name': 'linked'},
        'foreign_key': {'extraction_job_name': 'foreign'},
        'user_unit': {'extraction_job_unit': 'user'},
        'getty_unit': {'extraction_job_unit': 'getty'},
        'unmarked_unit': {'extraction_job_unit': 'mine'},
        'missing_dataset': {'extraction_job_dataset': str(tmp_path / 'missing.jsonl')},
        'unset_dataset': {'extraction_job_dataset': ''},
    }
    play = [{'hosts': 'localhost', 'gather_facts': False, 'vars': {'found': {}},
             'tasks': [_preflight_block(name, dict(base, **more)) for name, more in cases.items()] + [
                 _preflight_block('stop_user', {'extraction_job_unit': 'user'}, 'stop'),
                 {'name': 'Show', 'ansible.builtin.copy': {'content': '{{ found | to_json }}', 'dest': '{{ out }}'}}]}]
    run, out_file = ansible_playbook(tmp_path, 'owned', play, '-e', 'ansible_python_interpreter=%s' % sys.executable)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert KEY not in run.stdout + run.stderr
    found = yaml.safe_load(out_file.read_text())
    assert found['good'] == {'passed': True}, found['good']
    refused = "Refuse the dirs, the key file and the unit that are not the role's"
    expected = {
        'others_dirs': ['extraction_job_data_dir=%s exists and is not this role\'s: a directory nobody' % others,
                        'extraction_job_install_dir=%s exists and is not this role\'s: a directory root:' % group_dir,
                        'extraction_job_log_dir=%s exists and is not this role\'s: a directory root:root 0755; the '
                        'role makes it a directory root:root 0700' % wrong_mode],
        'output_dir': ['extraction_job_output_root/extraction_job_name=%s exists' % others],
        'linked_key': ['extraction_job_config_dir/extraction_job_name=%s exists and is not this role\'s: a link'
                       % (config / 'linked.key')],
        'foreign_key': ['extraction_job_config_dir/extraction_job_name=%s exists and is not this role\'s: a file nobody'
                        % (config / 'foreign.key')],
        # a unit name of the system's own is refused by the first check, before any dir is looked at
        'user_unit': ["extraction_job_unit='user' is the name of a unit the system has"],
        'getty_unit': ["extraction_job_unit='getty' is the name of a unit the system has"],
        'unmarked_unit': ['extraction_job_unit gives the unit file %s, which is not this role\'s' % (systemd / 'mine@.service')],
        'stop_user': ['extraction_job_unit gives the unit user@.service'],
        'missing_dataset': ["extraction_job_dataset='%s' is not a file on the controller" % (tmp_path / 'missing.jsonl')],
        'unset_dataset': ['extraction_job_dataset is not set'],
    }
    first_check = 'Check every value of the role against its rules'
    tasks = {'stop_user': "Refuse a unit that is not the role's", 'unset_dataset': 'Fail on an unset dataset',
             'missing_dataset': first_check, 'user_unit': first_check, 'getty_unit': first_check}
    # the system's own templates, where this host has them
    for name, unit in (('user_unit', 'user@.service'), ('getty_unit', 'getty@.service'), ('stop_user', 'user@.service')):
        if not any(os.path.exists(os.path.join(d, unit)) for d in ('/usr/lib/systemd/system', '/lib/systemd/system')):
            del expected[name]
    wrong = []
    for name, texts in expected.items():
        result = found.get(name, {})
        if result.get('task') != tasks.get(name, refused) or \
                not all(text in result.get('msg', '') for text in texts):
            wrong.append('%s: %s' % (name, result))
    assert wrong == [], '\n'.join(wrong)
    # nothing changed: owners, modes, the link and what it points to
    assert (os.stat(others).st_uid, oct(os.stat(others).st_mode & 0o7777)) == (nobody, '0o700')
    assert (os.stat(group_dir).st_gid, oct(os.stat(group_dir).st_mode & 0o7777)) == (nobody, '0o2755')
    assert oct(os.stat(wrong_mode).st_mode & 0o7777) == '0o755'
    assert (config / 'linked.key').is_symlink() and secret.read_text() == 'not the key\n'
    assert (config / 'foreign.key').read_text() == 'someone else\n'
    assert not (tmp_path / 'opt').exists() and not (tmp_path / 'log').exists() and not (tmp_path / 'var').exists()
