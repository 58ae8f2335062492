"""A value of the plan's own variables that reads the plan (lookup eagle3.extraction.host_plan) is refused
naming the variable, through the lookup and through the sglang_server role's first check, instead of the
lookup calling itself until Ansible gives up ("Maximum depth exceeded"). One ansible-playbook run on localhost."""

import yaml

from test_role_input_check import ansible_playbook

READS_THE_PLAN = "{{ lookup('eagle3.extraction.host_plan').job.dump_dir }}/sub"
PLAY = [{
    'hosts': 'localhost', 'gather_facts': False,
    'vars': {'extraction_job_dump_dir': READS_THE_PLAN, 'sglang_server_model_path': '/srv/models/m',
             'sglang_server_port': "{{ lookup('eagle3.extraction.host_plan').server.address.port }}"},
    'tasks': [
        {'name': 'Read the plan', 'ansible.builtin.debug': {'msg': "{{ lookup('eagle3.extraction.host_plan') }}"},
         'register': 'read', 'ignore_errors': True},
        {'name': 'Check sglang_server', 'eagle3.extraction.role_input_check': {'role': 'sglang_server'},
         'register': 'check', 'ignore_errors': True},
        {'name': 'Show', 'ansible.builtin.copy': {
            'content': '{{ {"read": read, "check": check} | to_json }}', 'dest': '{{ out }}'}},
    ],
}]
REFUSAL = ('reads the host plan (lookup eagle3.extraction.host_plan), which is made of it; give it a value that '
           'does not read the plan')


def test_a_value_that_reads_its_own_plan_is_named(tmp_path):
    run, out_file = ansible_playbook(tmp_path, 'loop', PLAY)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = yaml.safe_load(out_file.read_text())
    lookup, check = results['read'], results['check']
    assert lookup['failed'] and check['failed']
    # the first of the two the plan reads (READ is sorted) is named
    assert 'localhost: extraction_job_dump_dir="%s" %s' % (READS_THE_PLAN, REFUSAL) in lookup['msg']
    assert 'Maximum depth' not in lookup['msg'] and lookup['msg'].count('reads the host plan') == 1
    # the role's check reads its port, which reads the plan, whose dump dir reads it again
    assert len(check['errors']) == 1
    assert check['errors'][0].startswith('sglang_server_port cannot be read: ')
    assert check['errors'][0].endswith('localhost: extraction_job_dump_dir="%s" %s' % (READS_THE_PLAN, REFUSAL))
