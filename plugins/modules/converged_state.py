#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: converged_state
short_description: Record what a successful run left on a host, and tell later whether the host is still that way
version_added: 0.1.0
description:
  - O(mode=record) fingerprints the files a successful run left (O(files) and O(globs) by content, O(names) by the
    names that match, O(trees) by the names and sizes of their files) and writes the fingerprint, with O(record)
    (the run's inputs and whatever the next run compares), to the stamp file O(path) (mode 0600, written to a
    temporary file, flushed, renamed). O(inputs) (RV(inputs) of the O(mode=check) before the run) is kept with it.
  - O(mode=check) reads the stamp, fingerprints the same things again, reads the unit's C(ActiveState) and the
    health URL's status, and says whether the host is converged - the stamp exists, its inputs are O(inputs), every
    key of O(expect) equals the stamp's, the fingerprint is the same, the unit is active and health answers 200. It
    changes nothing.
  - With O(mode=check), the action plugin computes O(inputs) on the controller, when it is not given - one sha256 over
    the host's variables of the roles O(inputs_from) names (as templated, before any role ran) and over this
    collection's playbooks, roles and plugins (a new version of the collection is a new input) - and returns it
    as RV(inputs). With O(compare=false) it returns RV(inputs) and C(converged=false) without contacting the host;
    with O(listing) (its hypervisor's C(pct list) answer) neither when that answer does not list the host as running.
  - O(mode=digest) fingerprints O(files), O(globs), O(names) and O(trees) where it runs and returns RV(state) (a
    container's configuration on its hypervisor, delegated there); it needs no stamp.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  path:
    description:
      - The stamp file, an absolute path. Required with O(mode=check) and O(mode=record).
    type: path
  mode:
    description:
      - V(record) writes the stamp; V(check) compares the host with it; V(digest) only fingerprints.
    type: str
    choices: [record, check, digest]
    default: check
  unit:
    description:
      - The systemd unit that serves (with its suffix). With O(mode=record), required unless O(deployed) gives it.
    type: str
  url:
    description:
      - Its health URL. With O(mode=record), required unless O(deployed) gives it (its C(url) and C(/health)).
    type: str
  deployed:
    description:
      - With O(mode=record), what the role C(sglang_server) published (C(sglang_server_deployed)) - its C(unit),
        C(url), C(unit_file), C(config_file) and C(model_path) - watched besides O(files) and O(trees).
      - Ignored with the other modes, so that one task can give it at every step.
    type: dict
    default: {}
  job:
    description:
      - With O(mode=record), what the role C(extraction_job) published (C(extraction_job_deployed)) - its
        C(unit_file), C(key_file), C(dataset) (the path on the host) and C(configs) (each shard's config) watched by
        content, and C(units) (each shard's unit, in the order of C(configs)).
      - With O(mode=check), each shard must be running (its unit active) or complete (the C(status.json) in the
        C(output_dir) its config names says so, every sample done); one that is neither (refused, failed, stopped,
        its output removed) makes the host not converged (RV(differs) C(job)), so that the re-run starts it again.
      - Read from the stamp with O(mode=check); ignored with the other modes, so that one task can give it at every
        step.
    type: dict
    default: {}
  python:
    description:
      - With O(mode=record), the venv's interpreter (C(ml_env_python_bin)); sglang's sources under its
        C(site-packages) are watched by content and its installed distributions by name.
    type: path
  files:
    description:
      - Files watched by content; a file that does not exist counts as absent (and its appearance is a change).
    type: list
    elements: path
    default: []
  globs:
    description:
      - Recursive globs (C(**)) of files watched by content.
    type: list
    elements: str
    default: []
  names:
    description:
      - Globs whose matching names are watched (installed packages, C(*.dist-info)).
    type: list
    elements: str
    default: []
  trees:
    description:
      - Directories whose files are watched by name and size (model weights, too large to read).
    type: list
    elements: path
    default: []
  record:
    description:
      - With O(mode=record), kept in the stamp beside the fingerprint (the run's inputs, what the report shows).
    type: dict
    default: {}
  expect:
    description:
      - With O(mode=check), keys whose value in the stamp must be these.
    type: dict
    default: {}
  inputs:
    description:
      - The fingerprint of the run's inputs. With O(mode=check), computed by the action plugin when not given, and
        compared with the stamp's; with O(mode=record), kept in the stamp (give the check's RV(inputs), as the roles'
        defaults and facts must not count).
    type: str
  inputs_from:
    description:
      - With O(mode=check), the roles whose variables (C(<role>_*)) are the host's inputs, read on the controller.
    type: list
    elements: str
    default: []
  compare:
    description:
      - With O(mode=check) and V(false), only RV(inputs) is computed and the host is not contacted
        (C(converged=false), RV(differs) C([not compared])).
    type: bool
    default: true
  listing:
    description:
      - With O(mode=check), the result of M(eagle3.extraction.pct_list) on the host's hypervisor (a Proxmox VE node),
        or V(null) when that node is not in this run. The action plugin contacts the host only when it lists O(vmid)
        as running; the container's configuration fingerprint it read
        (RV(eagle3.extraction.pct_list#module:config_states)) must then be the stamp's C(node).
      - Otherwise the host is not contacted and not converged, and RV(differs) says why - C(not running), or C(node
        did not answer) (pct failed, the node was unreachable or not in this run) - so that the run starts the
        container first.
      - Read on the controller and not sent to the host; ignored with the other modes.
    type: dict
  vmid:
    description:
      - With O(listing), the container's ID on its node.
    type: int
extends_documentation_fragment:
  - eagle3.extraction.attributes
notes:
  - An action plugin of the same name runs first, on the controller (O(inputs)); the module runs on the host.
'''

EXAMPLES = r'''
- name: Record what the run left
  eagle3.extraction.converged_state:
    path: /var/lib/eagle3-extraction-converged.json
    mode: record
    unit: sglang-extraction.service
    url: http://127.0.0.1:30000/health
    files: [/etc/systemd/system/sglang-extraction.service]
    globs: [/root/ml-env/lib/python3*/site-packages/sglang/**/*.py]
    names: [/root/ml-env/lib/python3*/site-packages/*.dist-info]
    trees: [/srv/models/demo]
    record:
      inputs: "{{ inputs_sha256 }}"

- name: Fingerprint a container's configuration on its hypervisor
  eagle3.extraction.converged_state:
    mode: digest
    files: [/etc/pve/lxc/101.conf]
  delegate_to: pve1
  register: node_config

- name: Is the host still as the last successful run left it (its inputs computed on the controller)?
  eagle3.extraction.converged_state:
    path: /var/lib/eagle3-extraction-converged.json
    inputs_from: [sglang_server, ml_env]
    expect:
      node: "{{ node_config.state }}"
  register: converged

- name: The same for a container, compared only when its hypervisor's pct list answer says it runs
  eagle3.extraction.converged_state:
    path: /var/lib/eagle3-extraction-converged.json
    inputs_from: [sglang_server, ml_env]
    listing: "{{ hostvars[proxmox_container_node].pct_list_answer | default(none) }}"
    vmid: "{{ proxmox_container_vmid }}"
  register: converged
'''

RETURN = r'''
converged:
  description: With O(mode=check), whether the host is as the stamp says and its server healthy.
  returned: always
  type: bool
differs:
  description:
    - With O(mode=check), what is not as recorded (stamp, an O(expect) key, files, unit, health, job).
    - Or why the host was not compared - V(not compared) (O(compare=false)), and with O(listing) V(not running) or
      V(node did not answer).
  returned: always
  type: list
  elements: str
  sample: [files]
stamp:
  description: The stamp read (O(mode=check)) or written (O(mode=record)); null when there is none.
  returned: always
  type: dict
state:
  description: The fingerprint of the watched things now.
  returned: when there is something to fingerprint
  type: str
inputs:
  description: With O(mode=check), the fingerprint of the host's inputs (to give to O(mode=record) after the run).
  returned: with mode=check
  type: str
job:
  description: With O(mode=check), each shard of the job that is neither running nor complete, its unit, state and
    last error (as its C(status.json) says).
  returned: with mode=check
  type: list
  elements: str
  sample: ["eagle3-extraction-job@demo-shard-0.service: refused (refused to start: the shard still has ...)"]
active:
  description: With O(mode=check), the unit's C(ActiveState).
  returned: when a stamp was read
  type: str
health:
  description: With O(mode=check), the HTTP status of the health URL, null when nothing answered.
  returned: when a stamp was read
  type: int
'''

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.converged_differs import NOT_COMPARED
from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import fingerprint
from ansible_collections.eagle3.extraction.plugins.module_utils.server_probe import health, unit_properties, unit_running
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import config_output_dir
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_status import read_status


def read_stamp(path):
    """The stamp, or None when it is missing or unreadable (the host then runs every role)."""
    try:
        with open(path) as handle:
            stamp = json.load(handle)
        if not isinstance(stamp, dict) or not isinstance(stamp.get('watch'), dict):
            return None
        watch = stamp['watch']
        for key in ('files', 'globs', 'names', 'trees'):
            if not isinstance(watch.get(key), list):
                return None
        if not isinstance(watch.get('job', []), list):
            return None
        return stamp
    except (OSError, ValueError):
        return None


def write_atomically(path, text):
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, 'w') as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def expected(params):
    expect = dict(params['expect'])
    if params['inputs']:
        expect['inputs'] = params['inputs']
    return expect


def job_problems(shards):
    """Each shard (``{unit, config}``) that neither runs nor is complete: its unit, state and last error."""
    problems = []
    for shard in shards:
        unit = str(shard.get('unit', ''))
        if unit_running(unit_properties(unit, ('ActiveState',))['ActiveState']):
            continue
        output_dir = config_output_dir(str(shard.get('config', '')))
        if output_dir is None:
            problems.append('%s: its config %s names no output_dir' % (unit, shard.get('config')))
            continue
        status = read_status(output_dir)
        total = status.get('samples_total')
        if status.get('state') == 'complete' and total is not None and status.get('samples_done') == total:
            continue
        errors = status.get('last_errors') or []
        problems.append('%s: %s%s' % (unit, status.get('state'), ' (%s)' % errors[-1] if errors else ''))
    return problems


def check(module, params):
    inputs = params['inputs']
    if not params['compare']:
        module.exit_json(changed=False, converged=False, differs=[NOT_COMPARED], stamp=None, inputs=inputs)
    stamp = read_stamp(params['path'])
    if stamp is None:
        module.exit_json(changed=False, converged=False, differs=['stamp'], stamp=None, inputs=inputs)
    differs = [key for key, value in sorted(expected(params).items()) if stamp.get(key) != value]
    state = fingerprint(stamp['watch'])
    if state != stamp.get('state'):
        differs.append('files')
    active = unit_properties(stamp['watch'].get('unit', ''), ('ActiveState',))['ActiveState']
    if active != 'active':
        differs.append('unit')
    job = job_problems(stamp['watch'].get('job', []))
    if job:
        differs.append('job')
    code = health(stamp['watch'].get('url', '')) if not differs else None
    if not differs and code != 200:
        differs.append('health')
    module.exit_json(changed=False, converged=not differs, differs=differs, stamp=stamp, state=state,
                     active=active, health=code, inputs=inputs, job=job)


def watched(params):
    return dict(files=params['files'], globs=params['globs'], names=params['names'], trees=params['trees'])


def digest_only(module, params):
    module.exit_json(changed=False, state=fingerprint(watched(params)))


def watched_deployment(params):
    """What the roles left, from what they published: the unit, its configuration, the model,
    the venv's sglang sources and installed packages."""
    watch = watched(params)
    deployed = params['deployed']
    watch['files'] = watch['files'] + [deployed[key] for key in ('unit_file', 'config_file') if deployed.get(key)]
    watch['trees'] = watch['trees'] + ([deployed['model_path']] if deployed.get('model_path') else [])
    if params['python']:
        site = os.path.join(os.path.dirname(os.path.dirname(params['python'])), 'lib', 'python3*', 'site-packages')
        watch['globs'] = watch['globs'] + [os.path.join(site, 'sglang', '**', '*.py')]
        watch['names'] = watch['names'] + [os.path.join(site, '*.dist-info')]
    job = params['job']
    watch['files'] = watch['files'] + [job[key] for key in ('unit_file', 'key_file', 'dataset') if job.get(key)]
    watch['files'] = watch['files'] + [str(config) for config in job.get('configs') or []]
    watch['job'] = [dict(unit=str(unit), config=str(config))
                    for unit, config in zip(job.get('units') or [], job.get('configs') or [])]
    watch['unit'] = params['unit'] or deployed.get('unit')
    watch['url'] = params['url'] or ('%s/health' % deployed['url'] if deployed.get('url') else None)
    return watch


def record(module, params):
    watch = watched_deployment(params)
    for name in ('unit', 'url'):
        if not watch[name]:
            module.fail_json(msg='mode=record needs %s (or deployed.%s)' % (name, name))
    stamp = dict(params['record'], watch=watch, state=fingerprint(watch))
    if params['inputs']:
        stamp['inputs'] = params['inputs']
    text = json.dumps(stamp, sort_keys=True)
    old = read_stamp(params['path'])
    changed = old is None or json.dumps(old, sort_keys=True) != text
    if changed and not module.check_mode:
        try:
            write_atomically(params['path'], text)
        except OSError as exc:
            module.fail_json(msg='cannot write the stamp %s: %s' % (params['path'], exc))
    module.exit_json(changed=changed, converged=True, differs=[], stamp=stamp, state=stamp['state'])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path'),
            mode=dict(type='str', choices=['record', 'check', 'digest'], default='check'),
            unit=dict(type='str'),
            url=dict(type='str'),
            deployed=dict(type='dict', default={}),
            job=dict(type='dict', default={}),
            python=dict(type='path'),
            files=dict(type='list', elements='path', default=[]),
            globs=dict(type='list', elements='str', default=[]),
            names=dict(type='list', elements='str', default=[]),
            trees=dict(type='list', elements='path', default=[]),
            record=dict(type='dict', default={}),
            expect=dict(type='dict', default={}),
            inputs=dict(type='str'),
            inputs_from=dict(type='list', elements='str', default=[]),
            compare=dict(type='bool', default=True),
            listing=dict(type='dict'),
            vmid=dict(type='int'),
        ),
        required_if=[('mode', 'check', ['path']), ('mode', 'record', ['path'])],
        supports_check_mode=True,
    )
    params = module.params
    if params['mode'] == 'digest':
        digest_only(module, params)
    if not os.path.isabs(params['path']):
        module.fail_json(msg='path=%r is not an absolute path' % params['path'])
    job = params['job']
    if len(job.get('units') or []) != len(job.get('configs') or []):
        module.fail_json(msg='job: units and configs are one per shard, in the same order (%d and %d given)'
                         % (len(job.get('units') or []), len(job.get('configs') or [])))
    for key in ('watch', 'state', 'inputs'):
        if key in params['record']:
            module.fail_json(msg='record: %r is the fingerprint\'s own key' % key)
    if params['mode'] == 'record':
        record(module, params)
    check(module, params)


if __name__ == '__main__':
    main()
