#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: owned_paths
short_description: Refuse the directories, files and units a role would take over from someone else
version_added: 0.1.0
description:
  - Read in a role's preflight, before anything changes. Each path the role makes and gives an owner and a mode must
    not exist yet, or be the role's already - of the type, owner, group and mode the role gives it. A path that
    exists and is another's (another user's directory, C(/etc/ssl/private), C(/var/log/journal), a key file that is
    a link or has another owner) is refused, so that the role never changes its owner or mode, never overwrites it
    and never deletes it.
  - A unit file the role writes must not exist in any other directory systemd loads units from (a unit name such as
    C(user) or C(getty) would replace the system's C(user@.service) or C(getty@.service)), and where it exists in the
    role's directory it must hold the role's O(units[].marker) line.
  - Fails with a message that names each variable and its value. Changes nothing.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  dirs:
    description: The directories the role makes (C(state=directory) with an owner and a mode).
    type: list
    elements: dict
    default: []
    suboptions:
      variable:
        description: What gives the path, for the message (C(extraction_job_log_dir)).
        type: str
        required: true
      path:
        description: The directory, an absolute path.
        type: path
        required: true
      mode:
        description: The mode the role gives it, octal (C(0755)).
        type: str
        required: true
      owner:
        description: The owner the role gives it.
        type: str
        default: root
      group:
        description: The group the role gives it.
        type: str
        default: root
  files:
    description: The files the role writes or deletes (a key file); one that exists must be a plain file, not a link,
      with one name, of this owner, group and mode.
    type: list
    elements: dict
    default: []
    suboptions:
      variable:
        description: What gives the path, for the message.
        type: str
        required: true
      path:
        description: The file, an absolute path.
        type: path
        required: true
      mode:
        description: The mode the role gives it, octal (C(0600)).
        type: str
        required: true
      owner:
        description: The owner the role gives it.
        type: str
        default: root
      group:
        description: The group the role gives it.
        type: str
        default: root
  units:
    description: The unit files the role writes.
    type: list
    elements: dict
    default: []
    suboptions:
      variable:
        description: What gives the unit's name, for the message (C(extraction_job_unit)).
        type: str
        required: true
      name:
        description: The unit file's name (C(eagle3-extraction-job@.service)).
        type: str
        required: true
      dir:
        description: The directory the role writes it to.
        type: path
        required: true
      marker:
        description: A line every version of the role's unit file holds.
        type: str
        required: true
  unit_dirs:
    description: The directories systemd loads system units from.
    type: list
    elements: path
    default: [/etc/systemd/system, /run/systemd/system, /usr/local/lib/systemd/system, /usr/lib/systemd/system,
              /lib/systemd/system]
extends_documentation_fragment:
  - eagle3.extraction.attributes
'''

EXAMPLES = r'''
- name: Refuse a log dir or a key file that is another's
  eagle3.extraction.owned_paths:
    dirs:
      - {variable: extraction_job_log_dir, path: /var/log/eagle3-extraction, mode: "0700"}
    files:
      - {variable: extraction_job_config_dir, path: /etc/eagle3-extraction/extraction.key, mode: "0600"}
    units:
      - {variable: extraction_job_unit, name: eagle3-extraction-job@.service, dir: /etc/systemd/system,
         marker: "Description=EAGLE-3 extraction job %i"}
'''

RETURN = r'''
errors:
  description: What is another's, one message a path; empty when everything is the role's or does not exist yet.
  returned: always
  type: list
  elements: str
  sample: ["extraction_job_log_dir=/var/log/journal exists and is not this role's: a directory root:systemd-journal
            2755; the role makes it root:root 0700 ..."]
'''

import grp
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule


def _names(info):
    try:
        user = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        user = str(info.st_uid)
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    return user, group


def _kind(info):
    for test, word in ((stat.S_ISDIR, 'a directory'), (stat.S_ISREG, 'a file'), (stat.S_ISLNK, 'a link'),
                       (stat.S_ISFIFO, 'a FIFO'), (stat.S_ISSOCK, 'a socket')):
        if test(info.st_mode):
            return word
    return 'a device'


def _is_ours(info, want):
    user, group = _names(info)
    return user == want['owner'] and group == want['group'] and stat.S_IMODE(info.st_mode) == int(want['mode'], 8)


def _refusal(want, info, what, extra=''):
    user, group = _names(info)
    return ("%s=%s exists and is not this role's: %s%s %s:%s %04o; the role makes %s %s:%s %s. Nothing was changed: "
            "give a path that does not exist yet, or move that one away if it is a leftover of this role"
            % (want['variable'], want['path'], _kind(info), extra, user, group, stat.S_IMODE(info.st_mode), what,
               want['owner'], want['group'], want['mode']))


def dir_errors(wants):
    """Each existing dir that the role's chown/chmod would take over (the role follows a link: so does this)."""
    errors = []
    for want in wants:
        try:
            info = os.stat(want['path'])
        except FileNotFoundError:
            continue
        except OSError as exc:
            errors.append('%s=%s cannot be read: %s' % (want['variable'], want['path'], exc.strerror))
            continue
        if not stat.S_ISDIR(info.st_mode) or not _is_ours(info, want):
            extra = ' (through a link)' if os.path.islink(want['path']) else ''
            errors.append(_refusal(want, info, 'it a directory', extra))
    return errors


def file_errors(wants):
    """Each existing file that the role would overwrite or delete and that is not one it wrote."""
    errors = []
    for want in wants:
        try:
            info = os.lstat(want['path'])
        except FileNotFoundError:
            continue
        except OSError as exc:
            errors.append('%s=%s cannot be read: %s' % (want['variable'], want['path'], exc.strerror))
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or not _is_ours(info, want):
            extra = ' with %d names' % info.st_nlink if stat.S_ISREG(info.st_mode) and info.st_nlink != 1 else ''
            errors.append(_refusal(want, info, 'a plain file', extra))
    return errors


def unit_errors(wants, unit_dirs):
    """A unit file of the name in another unit dir (the system's), or one in the role's dir without its marker."""
    errors = []
    for want in wants:
        own = os.path.join(want['dir'], want['name'])
        elsewhere = [os.path.join(d, want['name']) for d in unit_dirs
                     if os.path.realpath(d) != os.path.realpath(want['dir'])
                     and os.path.lexists(os.path.join(d, want['name']))]
        if elsewhere:
            shown = (want['variable'], want['name'], ', '.join(elsewhere), want['variable'])
            errors.append("%s gives the unit %s, which is not this role's: systemd has it already (%s). Nothing was "
                          "changed: give %s a name no unit has" % shown)
            continue
        if not os.path.lexists(own):
            continue
        try:
            if os.path.islink(own) or not os.path.isfile(own):
                raise ValueError('not a plain file')
            with open(own, encoding='utf-8', errors='replace') as handle:
                if want['marker'] not in handle.read().splitlines():
                    raise ValueError('without the line %r' % want['marker'])
        except (OSError, ValueError) as exc:
            errors.append("%s gives the unit file %s, which is not this role's (%s). Nothing was changed: give %s a "
                          "name no unit has" % (want['variable'], own, exc, want['variable']))
    return errors


def main():
    path_spec = dict(variable=dict(type='str', required=True), path=dict(type='path', required=True),
                     mode=dict(type='str', required=True), owner=dict(type='str', default='root'),
                     group=dict(type='str', default='root'))
    module = AnsibleModule(
        argument_spec=dict(
            dirs=dict(type='list', elements='dict', default=[], options=path_spec),
            files=dict(type='list', elements='dict', default=[], options=path_spec),
            units=dict(type='list', elements='dict', default=[], options=dict(
                variable=dict(type='str', required=True), name=dict(type='str', required=True),
                dir=dict(type='path', required=True), marker=dict(type='str', required=True))),
            unit_dirs=dict(type='list', elements='path', default=[
                '/etc/systemd/system', '/run/systemd/system', '/usr/local/lib/systemd/system',
                '/usr/lib/systemd/system', '/lib/systemd/system']),
        ),
        supports_check_mode=True,
    )
    for want in module.params['dirs'] + module.params['files']:
        try:
            int(want['mode'], 8)
        except ValueError:
            module.fail_json(msg='mode=%r of %s is not an octal mode' % (want['mode'], want['variable']))
    errors = (dir_errors(module.params['dirs']) + file_errors(module.params['files'])
              + unit_errors(module.params['units'], module.params['unit_dirs']))
    if errors:
        module.fail_json(msg='nothing was changed; these paths are not this role\'s:\n' + '\n'.join(errors),
                         errors=errors, changed=False)
    module.exit_json(changed=False, errors=[])


if __name__ == '__main__':
    main()
