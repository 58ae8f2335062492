# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role README's variable table, made from the role's meta/argument_specs.yml.

The table sits between the two marker comments below; the rest of the README is written by
hand. A variable's range, format and reasons belong in its spec description, so that
ansible-doc, Ansible's validation and the README say the same. Needs PyYAML only.

    python lab/tools/role_readme.py --check          # exit 1 naming each README that differs
    python lab/tools/role_readme.py --write          # rewrite the tables
    python lab/tools/role_readme.py --check roles/ml_env   # some roles (their directories)
"""
import argparse
import difflib
import glob
import json
import os
import re
import sys

import yaml

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEGIN = ("<!-- BEGIN variables (made from the role's variable records by lab/tools/role_files.py --write;"
         ' do not edit) -->')
END = '<!-- END variables -->'
# Ansible's documentation markup: C(code), V(value), O(option), E(env var), M(module) are
# code; I() italic, B() bold, U(url), L(text, url). None of them nests.
MARKUP = re.compile(r'\b([CVOEMIBUL])\(([^)]*)\)')


def code(text):
    """A Markdown code span around text, whatever backticks it holds."""
    fence = '``' if '`' in text else '`'
    return '%s%s%s' % (fence, text.replace('\n', ' '), fence)


def markup(text):
    def one(match):
        kind, body = match.groups()
        if kind in 'CVOEM':
            return code(body)
        if kind == 'L':
            parts = body.split(',', 1)
            return '[%s](%s)' % (parts[0].strip(), parts[-1].strip())
        return {'I': '*%s*', 'B': '**%s**', 'U': '<%s>'}[kind] % body
    return MARKUP.sub(one, text)


def cell(text):
    # a pipe ends a table cell even inside a code span unless escaped (GitHub's tables)
    return re.sub(r'\s+', ' ', text).strip().replace('|', '\\|')


def kind(spec):
    text = spec.get('type', 'str')
    if spec.get('elements'):
        text = 'list of %s' % spec['elements']
    if 'choices' in spec:
        text += ': ' + ', '.join(code(str(choice)) for choice in spec['choices'])
    if spec.get('required'):
        text += ', required'
    if spec.get('no_log'):
        text += ', secret (no_log)'
    return text


def default(spec):
    if 'default' not in spec:
        return ''
    value = spec['default']
    if isinstance(value, str):
        return code(value) if value else '`""`'
    if isinstance(value, (list, dict)):
        return code(yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10 ** 6).strip())
    return code(json.dumps(value))


def description(spec):
    text = spec.get('description', '')
    return markup(' '.join(text) if isinstance(text, list) else text)


def table(options):
    lines = ['| variable | type | default | description |', '| --- | --- | --- | --- |']
    for name, spec in options.items():
        lines.append('| %s |' % ' | '.join(cell(part) for part in (code(name), kind(spec), default(spec), description(spec))))
    return lines


def section(specs):
    """The generated lines: main's table, then each other entry point (tasks_from) and its variables."""
    main = specs['main'].get('options') or {}
    lines = table(main)
    others = [name for name in specs if name != 'main']
    if others:
        lines.append('')
    for name in others:
        options = specs[name].get('options') or {}
        intro = '- `tasks_from: %s`: %s' % (name, markup(specs[name].get('short_description', '')).rstrip('.'))
        if options == main:
            lines.append(intro + '; the same variables.')
        elif all(main.get(option) == spec for option, spec in options.items()):
            lines.append(intro + '; of the variables above: %s.' % ', '.join(code(option) for option in options))
        else:
            # its own table, set off by blank lines: a list item right after a row would end up in the table
            lines.extend([intro + ':', ''] + table(options) + ([''] if name != others[-1] else []))
    return [BEGIN, ''] + lines + ['', END]


def render(role_dir, specs=None):
    """(README path, its text now, its text with the generated section), the table made from specs (default: the
    role's meta/argument_specs.yml); a missing marker raises ValueError."""
    if specs is None:
        with open(os.path.join(role_dir, 'meta', 'argument_specs.yml'), encoding='utf-8') as f:
            specs = yaml.safe_load(f)['argument_specs']
    readme = os.path.join(role_dir, 'README.md')
    with open(readme, encoding='utf-8') as f:
        text = f.read()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError('%s: no variable table between the markers %s and %s' % (readme, BEGIN, END))
    return readme, text, text[:start] + '\n'.join(section(specs)) + text[end + len(END):]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument('--check', action='store_true', help='exit 1 if a README differs from its spec')
    action.add_argument('--write', action='store_true', help='rewrite the tables between the markers')
    parser.add_argument('roles', nargs='*', help="role directories (default: the collection's roles/*)")
    args = parser.parse_args(argv)
    roles = args.roles or sorted(os.path.dirname(os.path.dirname(spec)) for spec in glob.glob(
        os.path.join(COLLECTION, 'roles', '*', 'meta', 'argument_specs.yml')))
    failed = 0
    for role_dir in roles:
        try:
            readme, old, new = render(role_dir)
            readme = os.path.relpath(readme)
        except ValueError as exc:
            print(exc)
            failed += 1
            continue
        if old == new:
            continue
        if args.write:
            with open(readme, 'w', encoding='utf-8') as f:
                f.write(new)
            print('%s: table written' % readme)
        else:
            print('%s: its variable table differs from meta/argument_specs.yml (python lab/tools/role_readme.py'
                  ' --write makes it again)' % readme)
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), readme, 'spec'))
            failed += 1
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
