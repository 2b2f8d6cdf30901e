"""environment.yml and pyproject.toml describe the same environment."""

import re
import tomllib

import yaml

from hybridlib.paths import REPO_ROOT


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_agrees_with_pyproject():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r): r.replace(" ", "") for r in project["dependencies"]}
    for extra in ("book", "test"):
        wanted.update({_name(r): r.replace(" ", "") for r in project["optional-dependencies"][extra]})
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {_name(r): r.replace(" ", "") for r in pip_section if not r.startswith("-")}
    for name, req in wanted.items():
        assert name in listed, f"environment.yml lacks {req}"
        if name != "torch":
            assert listed[name] == req, f"environment.yml has {listed[name]}, pyproject {req}"
    assert listed["torch"] == "torch==2.13.0", "the CPU torch the Makefile installs"
    assert "jupyter-book>=1.0.4,<2" in listed.values(), "Jupyter Book 2.x cannot build offline"
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "torch==2.13.0" in makefile and "requirements-offline-assets.txt" in makefile


def test_license_is_an_spdx_expression_setuptools_accepts(tmp_path):
    """PEP 639: ``license = "Apache-2.0"`` (setuptools >= 77) becomes ``License-Expression`` in the metadata,
    without the deprecation warning that the old ``license = {text = ...}`` table gets."""
    import shutil
    import subprocess
    import sys

    build = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["build-system"]
    assert build["requires"] == ["setuptools>=77"]
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    (tmp_path / "meta").mkdir()
    script = (
        "import sys, warnings; warnings.simplefilter('always'); from setuptools import build_meta; "
        "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "meta")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    metadata = (tmp_path / "meta" / done.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "license" not in done.stderr.lower()
