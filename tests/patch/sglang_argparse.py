"""Run SGLang's own argument parsing, as ``python -m sglang.launch_server`` does, without
its GPU stack: ``python sglang_argparse.py TREE ARGV_JSON`` prints the parsed settings as JSON.

TREE is an unpacked sglang wheel (tests/patch/sglang_source.py: tree()). sglang's server_args
imports torch, transformers, triton and more at module level only to define types and
defaults; those (STUBBED) are replaced here by permissive stand-in modules, so that
ServerArgs.add_cli_args builds the real parser and prepare_server_args runs the real
``--config`` merge (ConfigArgumentMerger) and parse_args. Only the final step, building
ServerArgs (its __post_init__ probes GPUs), is left out: the argparse Namespace is printed.
msgspec (sglang 0.5.23's records) must be real: sglang_source puts it on sys.path.
"""

import abc
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types

# the third-party modules sglang.srt.server_args pulls in, that the parser does not need
STUBBED = {
    'numpy', 'orjson', 'psutil', 'pybase64', 'requests', 'torch', 'triton', 'PIL', 'starlette', 'torchvision',
    'tqdm', 'IPython', 'pydantic', 'pydantic_core', 'aiohttp', 'transformers', 'zmq', 'safetensors', 'openai',
    'partial_json_parser', 'huggingface_hub', 'dill', 'sentencepiece',
}
# accelerator back ends the stubs must not seem to have (sglang would pick them)
ABSENT = {'npu', 'hpu', 'xpu', 'musa', 'mlu', 'mps'}
# attributes read at import time whose value must be a real one
VALUES = {'backend': 'cuda', 'hex': lambda *a: '00', '__class_validators__': [], '__version__': '2.9.0'}


class _Stub(abc.ABCMeta):
    """A class that answers every attribute, call, subscript and operator with another stub."""

    def __new__(mcs, name, bases=(), namespace=None, **kwargs):
        return super().__new__(mcs, name, bases, dict(namespace or {}))

    def __init__(cls, name, bases=(), namespace=None, **kwargs):
        super().__init__(name, bases, dict(namespace or {}))

    def __getattr__(cls, name):
        if name in VALUES:
            return VALUES[name]
        if name in ABSENT or (name.startswith('__') and name.endswith('__')):
            raise AttributeError(name)
        return _stub(name)

    def __call__(cls, *args, **kwargs):
        # a stub used as a decorator leaves the function as it is
        if len(args) == 1 and isinstance(args[0], types.FunctionType) and not kwargs:
            return args[0]
        return _stub('call')

    def register(cls, *args, **kwargs):  # transformers' Auto*.register, not ABCMeta's
        return args[-1] if args else cls

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __int__(cls):
        return 0

    def __float__(cls):
        return 0.0

    def __index__(cls):
        return 0

    def __len__(cls):
        return 0

    def __contains__(cls, item):
        return False

    def __lt__(cls, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(cls, other):
        return cls is other

    def __hash__(cls):
        return id(cls)

    def _same(cls, *args):
        return cls

    __or__ = __ror__ = __getitem__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __floordiv__ = __mod__ = __pow__ = __and__ = __rand__ = __neg__ = _same

    def __setitem__(cls, key, value):
        pass

    def __enter__(cls):
        return cls

    def __exit__(cls, *args):
        return False


def _stub(name):
    return _Stub(str(name), (), {})


class _StubModule(types.ModuleType):
    __version__ = VALUES['__version__']

    def __getattr__(self, name):
        if name in VALUES:
            return VALUES[name]
        if name in ABSENT or (name.startswith('__') and name.endswith('__')):
            raise AttributeError(name)
        return _stub(name)


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split('.')[0] not in STUBBED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def parse(argv):
    """SGLang's prepare_server_args(argv) up to (not into) ServerArgs: the parsed Namespace."""
    from sglang.srt import server_args  # pylint: disable=import-outside-toplevel

    server_args.ServerArgs.from_cli_args = staticmethod(lambda namespace: namespace)
    namespace = server_args.prepare_server_args(argv)
    # what rides along on the record (0.5.23's _launch_command) is not a setting
    return {k: v for k, v in vars(namespace).items() if not k.startswith('_')}


def main():
    tree, argv = sys.argv[1], json.loads(sys.argv[2])
    sys.path[:0] = [tree] + sys.argv[3:]
    os.environ.setdefault('SGLANG_USE_CPU_ENGINE', '1')   # 0.5.23 resolves its platform at import
    sys.meta_path.append(_StubFinder())
    settings = parse(argv)
    sys.stdout.write('\nSETTINGS ' + json.dumps(settings, default=repr, sort_keys=True) + '\n')


if __name__ == '__main__':
    main()
