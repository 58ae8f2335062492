"""The layers of plugins/ hold: every import between the collection's Python files, at the top of a file
or inside a function (where a cycle hides from the interpreter), goes down or sideways within a layer,
and none makes a cycle.

module_utils runs on the host inside a module's payload: it imports module_utils alone (and, of Ansible,
ansible.module_utils). A module imports module_utils alone. plugin_utils is the controller's shared code:
it imports module_utils and plugin_utils, never a plugin (a filter, lookup, action, module...). A plugin
(filter, lookup, action, inventory, connection...) imports plugin_utils and module_utils, not another
plugin: what two plugins share lives in plugin_utils.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = 'ansible_collections.eagle3.extraction.plugins'
PLUGINS = Path(__file__).resolve().parents[2] / 'plugins'
# what each kind of file under plugins/ may import of the collection; a plugin type not named here
# (filter, lookup, action, inventory, connection, doc_fragments...) gets PLUGIN
MAY_IMPORT = {
    'module_utils': {'module_utils'},
    'modules': {'module_utils'},
    'plugin_utils': {'module_utils', 'plugin_utils'},
}
PLUGIN = {'module_utils', 'plugin_utils'}
# of Ansible itself, what runs on the host may import ansible.module_utils alone
HOST_SIDE = ('module_utils', 'modules')
# Known upward edges, each to be removed by a named change; none may be added.
# imports a layer may make against its rule (none: add one only with the reason beside it)
KNOWN = set()


def _module_name(path, root):
    return '.'.join(path.relative_to(root).with_suffix('').parts)


def _resolve(node, importer, known):
    """The collection modules (dotted under plugins/) and the Ansible modules an import names."""
    inside, outside = [], []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = importer.split('.')[:-node.level]
            target = '.'.join(base + ([node.module] if node.module else []))
            names = [PACKAGE + '.' + target if target else PACKAGE]
        else:
            names = [node.module or '']
        # `from package import module` names the module itself
        names = [name + '.' + alias.name if name.startswith(PACKAGE) and
                 name[len(PACKAGE) + 1:] + '.' + alias.name in known else name
                 for name in names for alias in node.names]
    for name in names:
        if name.startswith(PACKAGE + '.'):
            inside.append(name[len(PACKAGE) + 1:])
        elif name == 'ansible' or name.startswith('ansible.'):
            outside.append(name)
    return inside, outside


def import_graph(root):
    """{module: {imported collection module: line}} and {module: {Ansible module: line}} of every .py
    under root (plugins/), from every import statement of each file, at any depth."""
    files = dict((_module_name(path, root), path) for path in sorted(root.rglob('*.py')))
    graph, ansible = {}, {}
    for name, path in files.items():
        graph[name], ansible[name] = {}, {}
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                inside, outside = _resolve(node, name, files)
                for target in inside:
                    # a package's __init__ or a name that is no file: the longest module it starts with
                    while target not in files and '.' in target:
                        target = target.rsplit('.', 1)[0]
                    if target in files and target != name:
                        graph[name].setdefault(target, node.lineno)
                for target in outside:
                    ansible[name].setdefault(target, node.lineno)
    return graph, ansible


def upward_imports(graph, ansible, known=frozenset()):
    """'importer:line imports target' for each import its layer may not make (KNOWN left out)."""
    found = []
    for name in sorted(graph):
        layer = name.split('.')[0]
        allowed = MAY_IMPORT.get(layer, PLUGIN)
        for target, line in sorted(graph[name].items()):
            if target.split('.')[0] not in allowed and (name, target) not in known:
                found.append('plugins/%s.py:%d imports %s' % (name.replace('.', '/'), line, target))
        if layer in HOST_SIDE:
            for target, line in sorted(ansible[name].items()):
                if not (target + '.').startswith('ansible.module_utils.'):
                    found.append('plugins/%s.py:%d imports %s' % (name.replace('.', '/'), line, target))
    return found


def cycles(graph):
    """Each set of modules that import one another, directly or not (Tarjan's strongly connected components
    of more than one module, or a module importing itself)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, {}):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_goes_up_a_layer():
    graph, ansible = import_graph(PLUGINS)
    assert upward_imports(graph, ansible, KNOWN) == []


def test_no_import_cycle():
    graph, dummy = import_graph(PLUGINS)
    assert cycles(graph) == []


def test_each_known_exception_is_still_there():
    # an exception whose import is gone is dropped from KNOWN, so that it cannot come back unseen
    graph, dummy = import_graph(PLUGINS)
    assert sorted(edge for edge in KNOWN if edge[1] not in graph.get(edge[0], {})) == []


def _tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_an_upward_import_at_any_depth_is_found(tmp_path):
    root = _tree(tmp_path / 'plugins', {
        'module_utils/low.py': 'from ansible.errors import AnsibleError\n',
        'modules/mod.py': 'RE = 1\n',
        'plugin_utils/checks.py': ('def f():\n'
                                   '    from %s.modules.mod import RE\n'
                                   '    from ..filter import unit\n' % PACKAGE),
        'filter/unit.py': 'from %s.filter.other import g\n' % PACKAGE,
        'filter/other.py': 'from %s.plugin_utils import checks\n' % PACKAGE,
        'lookup/plan.py': 'from %s.plugin_utils import checks\n' % PACKAGE,
    })
    graph, ansible = import_graph(root)
    assert upward_imports(graph, ansible) == [
        'plugins/filter/unit.py:1 imports filter.other',
        'plugins/module_utils/low.py:1 imports ansible.errors',
        'plugins/plugin_utils/checks.py:3 imports filter.unit',
        'plugins/plugin_utils/checks.py:2 imports modules.mod',
    ]


def test_a_cycle_hidden_in_a_function_is_found(tmp_path):
    root = _tree(tmp_path / 'plugins', {
        'plugin_utils/address.py': 'from %s.plugin_utils.layout import layout\n' % PACKAGE,
        'plugin_utils/layout.py': 'def errors():\n    from %s.plugin_utils.address import bind\n' % PACKAGE,
        'plugin_utils/alone.py': 'from %s.plugin_utils import layout\n' % PACKAGE,
    })
    graph, dummy = import_graph(root)
    assert cycles(graph) == [['plugin_utils.address', 'plugin_utils.layout']]
