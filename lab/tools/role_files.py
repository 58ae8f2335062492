# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's meta/argument_specs.yml, defaults/main.yml and README variable table (role_readme.py's), made
from its variable records (plugins/plugin_utils/role_variables/<role>.py): a variable is declared once, there.

    python lab/tools/role_files.py --check          # exit 1 naming each file that differs (with its diff)
    python lab/tools/role_files.py --write          # write them again
    python lab/tools/role_files.py --check ml_env   # some roles

Needs PyYAML and the collection's plugins (the controller's venv: .venv/bin/python).
"""
import argparse
import difflib
import os
import re
import sys
import tempfile

import yaml

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import role_readme  # noqa: E402  pylint: disable=wrong-import-position

HEADER = ('# Made from plugins/plugin_utils/role_variables/%s.py by lab/tools/role_files.py --write:\n'
          '# edit the records there, not this file.\n')
WIDTH = 100


def _import_records():
    """plugin_utils.variables of this checkout, through a link ansible_collections/eagle3/extraction -> it."""
    links = tempfile.mkdtemp(prefix='role-files-')
    os.makedirs(os.path.join(links, 'ansible_collections', 'eagle3'))
    os.symlink(COLLECTION, os.path.join(links, 'ansible_collections', 'eagle3', 'extraction'))
    sys.path.insert(0, links)
    from ansible_collections.eagle3.extraction.plugins.plugin_utils import variables  # pylint: disable=import-error
    return variables


class _Dumper(yaml.SafeDumper):
    """Sequences indented under their key, as the rest of the collection's YAML; a template on one line."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)

    def write_double_quoted(self, text, split=True):
        # only templates are double-quoted (_str): a template is easier to read whole
        super().write_double_quoted(text, split=False)


def _str(dumper, value):
    style = '"' if '{{' in value else None
    return dumper.represent_scalar('tag:yaml.org,2002:str', value, style=style)


_Dumper.add_representer(str, _str)


def dump(data):
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=WIDTH, allow_unicode=True, default_flow_style=False)


def _named_anchors(text, role):
    """PyYAML's &id001 anchors named after their key (the main options: <role>_options)."""
    names = {}
    for key, anchor in re.findall(r'([A-Za-z0-9_]+): &(id[0-9]+)', text):
        names[anchor] = role + '_options' if key == 'options' else key
    return re.sub(r'([&*])(id[0-9]+)\b', lambda m: m.group(1) + names.get(m.group(2), m.group(2)), text)


def specs_text(variables, role):
    """The role's meta/argument_specs.yml."""
    return '---\n' + HEADER % role + _named_anchors(dump(variables.argument_specs(role)), role)


def defaults_text(variables, role):
    """The role's defaults/main.yml: each record's comment and default, in the records' order."""
    lines = ['---\n' + HEADER % role]
    lines.extend('#%s\n' % (' ' + line if line else '') for line in variables.defaults_header(role))
    for variable in variables.records(role):
        if not variable.has_default:
            continue
        block = ['\n'] if variable.group else []
        block.extend('#%s\n' % (' ' + line if line else '') for line in variable.comment.splitlines())
        block.append(dump({variable.name: variable.default}))
        lines.append(''.join(block))
    return ''.join(lines)


def readme_text(variables, role):
    """The role's README.md with its variable table made from the records' argument spec."""
    return role_readme.render(os.path.join(COLLECTION, 'roles', role),
                              variables.argument_specs(role)['argument_specs'])[2]


def files(variables, role):
    """{path in the collection: its text made from the records} of the role's three files."""
    return {os.path.join('roles', role, 'meta', 'argument_specs.yml'): specs_text(variables, role),
            os.path.join('roles', role, 'defaults', 'main.yml'): defaults_text(variables, role),
            os.path.join('roles', role, 'README.md'): readme_text(variables, role)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument('--check', action='store_true', help='exit 1 if a file differs from the records')
    action.add_argument('--write', action='store_true', help='write the files again')
    parser.add_argument('roles', nargs='*', help='role names (default: every role)')
    args = parser.parse_args(argv)
    variables = _import_records()
    failed = 0
    for role in args.roles or variables.ROLES:
        for path, new in files(variables, role).items():
            with open(os.path.join(COLLECTION, path), encoding='utf-8') as f:
                old = f.read()
            if old == new:
                continue
            if args.write:
                with open(os.path.join(COLLECTION, path), 'w', encoding='utf-8') as f:
                    f.write(new)
                print('%s: written' % path)
            else:
                print('%s: differs from plugins/plugin_utils/role_variables/%s.py (python lab/tools/role_files.py '
                      '--write makes it again)' % (path, role))
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), path, 'records'))
                failed += 1
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
