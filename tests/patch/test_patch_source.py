"""Each shipped patch against the real sglang source of its version."""

from __future__ import annotations

import os
import py_compile

import pytest
import yaml

import sglang_source

VERSIONS = sglang_source.supported_versions()
TARGET = "sglang/srt/models/deepseek_v2.py"


def test_the_role_supports_exactly_the_versions_it_ships_a_patch_for():
    with open(os.path.join(sglang_source.ROLE, "vars", "main.yml")) as f:
        declared = yaml.safe_load(f)["__sglang_patch_supported_versions"]
    assert sorted(declared) == VERSIONS
    assert "0.5.23" in VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_patch_applies_to_the_real_file_and_compiles(version, tmp_path):
    spec = sglang_source.spec(version)
    assert spec["version"] == version and "sglang/" + spec["file"] == TARGET
    with open(sglang_source.extract(version, TARGET), encoding="utf-8") as f:
        pristine = f.read()
    assert sglang_source.sha256(pristine) == spec["pristine_sha256"]
    for ins in spec["insertions"]:
        assert pristine.count(ins["after"]) == 1, ins["after"]

    patched = sglang_source.apply(pristine, spec)
    assert sglang_source.sha256(patched) == spec["patched_sha256"]
    assert "eagle3_hs_capture" not in pristine and "eagle3_hs_capture.install(self)" in patched
    out = tmp_path / "deepseek_v2.py"
    out.write_text(patched, encoding="utf-8")
    py_compile.compile(str(out), cfile=str(tmp_path / "out.pyc"), doraise=True)

    # the patch is small and only adds lines
    added = len(patched.splitlines()) - len(pristine.splitlines())
    assert 0 < added <= 12
    assert sglang_source.revert(patched, spec) == pristine


@pytest.mark.parametrize("version", VERSIONS)
def test_the_capture_module_lands_where_the_patch_imports_it(version):
    """`from sglang.srt import eagle3_hs_capture`: the role puts it in sglang/srt/."""
    spec = sglang_source.spec(version)
    text = "".join(ins["text"] for ins in spec["insertions"])
    assert "from sglang.srt import eagle3_hs_capture" in text
    with open(os.path.join(sglang_source.ROLE, "vars", "main.yml")) as f:
        assert yaml.safe_load(f)["__sglang_patch_module_name"] == "eagle3_hs_capture.py"
    with open(os.path.join(sglang_source.ROLE, "vars", "main.yml")) as f:
        assert "/srt/{{ __sglang_patch_module_name }}" in f.read()
