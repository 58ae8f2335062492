"""The real sglang source the patch is tested against, and the patch spec.

``pip download --no-deps sglang==<version>`` (one 39 MB wheel, cached under
``.ansible/cache/sglang/``, gitignored) and the files the tests need unpacked from it.
Used by tests/patch and tests/capture, with whichever interpreter runs them: the
wheel is cp312, so pip is told the target explicitly.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import subprocess
import sys
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(REPO, ".ansible", "cache", "sglang")
ROLE = os.path.join(REPO, "roles", "sglang_patch")


def wheel(version: str) -> str:
    """Path of the cached sglang wheel, downloaded on first use."""
    found = glob.glob(os.path.join(CACHE, f"sglang-{version}-*.whl"))
    if not found:
        os.makedirs(CACHE, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
             "--only-binary=:all:", "--python-version", "3.12",
             "--implementation", "cp", "--platform", "manylinux_2_34_x86_64",
             "-d", CACHE, f"sglang=={version}"],
            check=True,
        )
        found = glob.glob(os.path.join(CACHE, f"sglang-{version}-*.whl"))
    return found[0]


def extract(version: str, member: str) -> str:
    """Unpack one member (e.g. ``sglang/srt/models/deepseek_v2.py``); returns its path."""
    dest = os.path.join(CACHE, version)
    path = os.path.join(dest, member)
    if not os.path.exists(path):
        with zipfile.ZipFile(wheel(version)) as z:
            z.extract(member, dest)
    return path


def spec(version: str) -> dict:
    """The role's patch spec for one sglang version."""
    import yaml  # only here: the capture tests' venv has no PyYAML

    with open(os.path.join(ROLE, "vars", "patches", f"{version}.yml")) as f:
        return yaml.safe_load(f)["__sglang_patch_spec"]


def supported_versions() -> list:
    return sorted(
        os.path.basename(p)[: -len(".yml")]
        for p in glob.glob(os.path.join(ROLE, "vars", "patches", "*.yml"))
    )


def _indented(insertion: dict) -> str:
    pad = " " * insertion["indent"]
    return re.sub(r"(?m)^(?=.)", pad, insertion["text"])


def apply(text: str, patch: dict) -> str:
    """What the role does, in Python: each anchor must occur exactly once."""
    for ins in patch["insertions"]:
        count = text.count(ins["after"])
        if count != 1:
            raise ValueError(f"anchor {ins['after']!r} occurs {count} times")
        text = text.replace(ins["after"], ins["after"] + _indented(ins), 1)
    return text


def revert(text: str, patch: dict) -> str:
    for ins in reversed(patch["insertions"]):
        text = text.replace(ins["after"] + _indented(ins), ins["after"], 1)
    return text


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- wheels for the role tests (no build backend needed) ------------------------

FAKE_SGLANG_INIT = (
    '"""A stand-in sglang for the eagle3.extraction role tests: only the files the\n'
    'roles touch, deepseek_v2.py being the real one. Importing it fails on purpose:\n'
    'the roles must find sglang and its version without importing it."""\n'
    'raise ImportError("fake sglang: the roles must not import sglang")\n'
)


def make_wheel(name: str, version: str, files: dict, out_dir: str) -> str:
    """A pure-Python wheel holding ``files`` ({archive path: text}); returns its path."""
    import base64

    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: eagle3.extraction tests\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{dist}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, text in sorted(files.items()):
            # a fixed date: the same inputs give the same wheel, byte for byte
            z.writestr(zipfile.ZipInfo(member, (2026, 1, 1, 0, 0, 0)), text)
    return path


def fake_sglang_wheel(version: str, out_dir: str, source_version: str = "0.5.23") -> str:
    """sglang ``version`` whose deepseek_v2.py is the real one of ``source_version``."""
    with open(extract(source_version, "sglang/srt/models/deepseek_v2.py"), encoding="utf-8") as f:
        deepseek = f.read()
    files = {
        "sglang/__init__.py": FAKE_SGLANG_INIT,
        "sglang/srt/__init__.py": "",
        "sglang/srt/models/__init__.py": "",
        "sglang/srt/models/deepseek_v2.py": deepseek,
    }
    return make_wheel("sglang", version, files, out_dir)


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    fake = sub.add_parser("fake-wheel", help="build a stand-in sglang wheel")
    fake.add_argument("--version", required=True)
    fake.add_argument("--source-version", default="0.5.23")
    fake.add_argument("--out", required=True)
    demo = sub.add_parser("demo-wheel", help="build a one-module wheel")
    demo.add_argument("--name", required=True)
    demo.add_argument("--version", required=True)
    demo.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "fake-wheel":
        print(fake_sglang_wheel(args.version, args.out, args.source_version))
    else:
        module = args.name.replace("-", "_")
        print(make_wheel(args.name, args.version,
                         {f"{module}.py": f'VERSION = "{args.version}"\n'}, args.out))


if __name__ == "__main__":
    main()
