"""`ansible-test sanity` on each installed collection, as Galaxy / Automation Hub run it.

ansible-test comes from the sanity venvs of scripts/deps/ansible-sanity.sh (the project's ansible-core on
the project's Python, and the newest release of every other minor requires_ansible admits, each with the requirements its sanity tests
pin), runs `--local` (no containers here) with HOME in that venv, where its per-test venvs are cached and
bootstrapped offline.

Skipped tests, each because it needs something PyPI does not have:
- pslint: PowerShell and PSScriptAnalyzer (the collections hold no PowerShell anyway).
- shellcheck: the shellcheck binary (the collections hold no shell scripts anyway).
No other exclusion: the modules in plugins/modules/ are Python documentation stubs (the binaries live in
builds/), so validate-modules reads every one and no collection has a tests/sanity/ignore-*.txt, which is what
Automation Hub certification (ansible-lint's sanity[cannot-ignore]) asks;
`test_validate_modules_checks_the_module_docs` shows validate-modules reading them.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testlib import MODULE_BINARIES, REPO

COLLECTIONS = sorted(set(MODULE_BINARIES.values()))
SKIPPED = ["pslint", "shellcheck"]
SCRIPT = REPO / "scripts/deps/ansible-sanity.sh"


def sanity_releases() -> list[tuple[str, str]]:
    """(ansible-core version, Python minor) of each sanity venv: the project's and the script's others."""
    project = re.search(r"^ansible-core==(\S+)", (REPO / "requirements-dev.txt").read_text(), re.M).group(1)
    line = re.search(r"^RELEASES=\((.*)\)$", SCRIPT.read_text(), re.M).group(1)
    others = [tuple(r.split(":")) for r in re.findall(r"(?<![\w$])\d+\.\d+\.\d+:\d+\.\d+", line)]
    return [(project, f"{sys.version_info.major}.{sys.version_info.minor}"), *others]


RELEASES = sanity_releases()


def sanity_venv(version: str) -> Path:
    root = Path(os.environ.get("PROXSHIFT_SANITY_VENVS", "/var/cache/proxshift"))
    venv = root / f"ansible-sanity-{version}"
    if not (venv / "bin" / "ansible-test").exists() or not (venv / "home/.ansible/test/cache").is_dir():
        pytest.fail(f"{venv} is not set up: run scripts/deps/ansible-sanity.sh (part of `make test-deps`)")
    return venv


def ansible_test(collection_dir: Path, *args: str, release: tuple[str, str] = RELEASES[0]) -> subprocess.CompletedProcess:
    version, python = release
    venv = sanity_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(HOME=str(venv / "home"), PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    cmd = [str(venv / "bin/ansible-test"), "sanity", "--local", "--python", python, "--color", "no", *args]
    return subprocess.run(cmd, cwd=collection_dir, env=env, capture_output=True, text=True, timeout=1200)


def test_every_minor_requires_ansible_admits_is_checked():
    """One sanity release per ansible-core minor from each collection's requires_ansible lower bound to the
    newest in the list: a minor a user may run is never left out."""
    minors = sorted({tuple(int(x) for x in v.split(".")[:2]) for v, _ in RELEASES})
    for coll in COLLECTIONS:
        runtime = (REPO / "ansible_collections/proxshift" / coll / "meta/runtime.yml").read_text()
        low = tuple(int(x) for x in re.search(r'requires_ansible:\s*"?>=\s*(\d+)\.(\d+)', runtime).groups())
        want = [(low[0], m) for m in range(low[1], minors[-1][1] + 1)]
        assert [m for m in minors if m >= low] == want, (coll, minors)


@pytest.mark.parametrize("release", RELEASES, ids=[f"core{v}-py{p}" for v, p in RELEASES])
@pytest.mark.parametrize("coll", COLLECTIONS)
def test_sanity_passes(coll, release, installed_collections):
    root = installed_collections / "ansible_collections/proxshift" / coll
    skips = [a for t in SKIPPED for a in ("--skip-test", t)]
    proc = ansible_test(root, *skips, release=release)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-20000:]
    ran = set(re.findall(r'Running sanity test "([^"]+)"', out))
    for test in ("validate-modules", "ansible-doc", "yamllint", "pylint", "pep8", "runtime-metadata",
                 "changelog", "ignores", "shebang", "compile", "import"):
        assert any(r == test or r.startswith(test + "-") for r in ran), f"{test} did not run: {sorted(ran)}"


def test_no_collection_ignores_a_sanity_test():
    for coll in COLLECTIONS:
        root = REPO / "ansible_collections/proxshift" / coll
        assert not list(root.glob("tests/sanity/ignore-*.txt")), f"{coll} has sanity ignore files"
        stubs = sorted(p.stem for p in (root / "plugins/modules").glob("*.py"))
        assert stubs == sorted(f"{m}" for m, owner in MODULE_BINARIES.items() if owner == coll), stubs


def test_validate_modules_checks_the_module_docs(installed_collections, tmp_path):
    # The control: a stub with an invalid return type in a copy of the installed collection fails
    # validate-modules, naming the file.
    src = installed_collections / "ansible_collections/proxshift/hashi_vault"
    root = tmp_path / "ansible_collections/proxshift/hashi_vault"
    shutil.copytree(src, root, symlinks=True)
    stub = root / "plugins/modules/hashicorp_vault_info.py"
    text = stub.read_text()
    assert "\n  type: str\n" in text
    stub.write_text(text.replace("\n  type: str\n", "\n  type: not-a-type\n", 1))
    proc = ansible_test(root, "--test", "validate-modules")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "plugins/modules/hashicorp_vault_info.py" in out and "return-syntax-error" in out, out
