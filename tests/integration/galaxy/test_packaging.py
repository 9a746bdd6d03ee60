"""The three collections build into Galaxy tarballs that hold the licence, the binaries and nothing else,
install into a clean collections path, and run from there."""
from __future__ import annotations

import json
import re
import tarfile

import yaml

from testlib import MODULE_BINARIES, REPO

GALAXY_LIMIT = 20 * 1024 * 1024
# Each collection stays inside Galaxy's limit with a margin. openshift carries seven modules, each built
# for x86_64 and aarch64 at about 1.2 MB compressed per build (~17 MB in all): an eighth module would
# need the modules to share one binary per architecture (a multi-call binary) to stay under the limit.
TARBALL_BUDGET = GALAXY_LIMIT * 0.9
ELF_MAGIC = b"\x7fELF"
# Build output and caches that must never reach a tarball.
JUNK = re.compile(
    r"(^|/)(target|tests/output|\.pytest_cache|__pycache__|\.git|\.cache)(/|$)|\.pyc$|\.tar\.gz$|"
    r"^changelogs/\.plugin-cache\.yaml$|~$|\.orig$|\.rej$"
)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)")


def members(tarball) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(tarball) as tf:
        return {m.name: m for m in tf.getmembers()}


def read_member(tarball, name: str) -> bytes:
    with tarfile.open(tarball) as tf:
        return tf.extractfile(name).read()


def test_tarballs_hold_licence_binaries_and_no_build_junk(built_tarballs):
    gpl = (REPO / "COPYING").read_bytes()
    assert b"GNU GENERAL PUBLIC LICENSE" in gpl and b"Version 3, 29 June 2007" in gpl
    for coll, tarball in built_tarballs.items():
        assert tarball.stat().st_size < TARBALL_BUDGET, f"{tarball} is {tarball.stat().st_size} bytes"
        found = members(tarball)
        assert read_member(tarball, "COPYING") == gpl, f"{tarball.name}: COPYING is not the GPL-3.0 text"
        for required in ("MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.rst", "changelogs/changelog.yaml",
                         "meta/runtime.yml"):
            assert required in found, f"{required} missing from {tarball.name}"
        own = [m for m, owner in MODULE_BINARIES.items() if owner == coll]
        for module in own:
            member = found[f"plugins/modules/{module}"]
            assert member.mode & 0o111, f"{module} is not executable in {tarball.name}"
            assert read_member(tarball, member.name)[:4] == ELF_MAGIC, f"{module} in {tarball.name} is no binary"
            assert f"plugins/modules/{module}.yml" in found
            arm = found[f"builds/linux-aarch64/{module}"]
            assert arm.mode & 0o111, f"the aarch64 {module} is not executable in {tarball.name}"
            assert read_member(tarball, arm.name)[18:20] == (183).to_bytes(2, "little"), f"{arm.name} is not aarch64"
        junk = [n for n in found if JUNK.search(n)]
        assert not junk, f"{tarball.name} holds build output or caches: {junk}"
        # Executables are exactly the module binaries, two builds each (no stray scripts or build tools).
        executables = {n for n, m in found.items() if m.isfile() and m.mode & 0o111}
        assert executables == {f"{d}/{m}" for m in own for d in ("plugins/modules", "builds/linux-aarch64")}, executables


def test_manifest_names_the_licence_and_version(built_tarballs):
    for coll, tarball in built_tarballs.items():
        galaxy = yaml.safe_load((REPO / "ansible_collections/proxshift" / coll / "galaxy.yml").read_text())
        info = json.loads(read_member(tarball, "MANIFEST.json"))["collection_info"]
        assert info["license"] == ["GPL-3.0-or-later"], info
        assert info["version"] == galaxy["version"]
        assert tarball.name == f"proxshift-{coll}-{galaxy['version']}.tar.gz"
        changelog = yaml.safe_load(read_member(tarball, "changelogs/changelog.yaml"))
        assert galaxy["version"] in changelog["releases"], f"{coll}: no changelog entry for {galaxy['version']}"
        rendered = read_member(tarball, "CHANGELOG.rst").decode()
        assert f"v{galaxy['version']}" in rendered
        for module, owner in MODULE_BINARIES.items():
            if owner == coll:
                assert f"proxshift.{coll}.{module}" in rendered, f"{module} missing from {coll}'s CHANGELOG.rst"


def test_readmes_link_only_inside_the_collection(built_tarballs):
    for coll, tarball in built_tarballs.items():
        found = members(tarball)
        readmes = [n for n in found if n == "README.md" or n.endswith("/README.md")]
        assert "README.md" in readmes and len(readmes) > 1, readmes  # the collection's and its roles'
        for readme in readmes:
            text = read_member(tarball, readme).decode()
            base = readme.rsplit("/", 1)[0] + "/" if "/" in readme else ""
            for target in MARKDOWN_LINK.findall(text):
                if target.startswith("#"):
                    continue
                assert "://" not in target and not target.startswith("/"), f"{coll}/{readme} links out: {target}"
                resolved = _normalise(base + target.split("#")[0])
                assert resolved in found, f"{coll}/{readme} links to {target}, not in the collection"
        # The collection README names its changelog and licence files, which ship with it.
        text = read_member(tarball, "README.md").decode()
        assert "COPYING" in text and "CHANGELOG.rst" in text


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if not parts:
                return "../" + path  # escapes the collection
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def test_installed_copy_runs_a_module_in_check_mode(installed_collections, openbao, run_playbook):
    openbao.kv_put("galaxy/existing", {"from": "openbao"})
    play = """
- hosts: localhost
  gather_facts: false
  module_defaults:
    group/proxshift.hashi_vault.vault:
      url: "{{ vault_addr }}"
      token: "{{ vault_token }}"
      retries: 0
  tasks:
    - name: write in check mode
      proxshift.hashi_vault.hashicorp_vault:
        path: galaxy/new
        data: {answer: "42"}
      check_mode: true
      register: write

    - name: read
      proxshift.hashi_vault.hashicorp_vault_info:
        path: galaxy/existing
      register: read

    - name: call with a bad option
      proxshift.openshift.ocp_manifests:
        surely_not_an_option: 1
      ignore_errors: true
"""
    # Only the installed copy is on the collections path (ANSIBLE_COLLECTIONS_PATH replaces the checkout's).
    run = run_playbook(
        play, verbosity=3, env={"ANSIBLE_COLLECTIONS_PATH": str(installed_collections)},
        extra_vars={"vault_addr": openbao.addr, "vault_token": openbao.token},
    )
    assert run.status("write in check mode") == "ok", run.output
    assert run.task("write in check mode")["changed"] is True
    assert openbao.kv_get("galaxy/new") is None, "check mode wrote the secret"
    read = run.task("read")
    assert read["found"] is True and read["data"] == {"from": "openbao"}, read
    assert read["changed"] is False
    bad = run.task("call with a bad option")
    assert "Unsupported parameters" in bad["msg"], bad
    # Every module file ansible-core ran came from the installed copy.
    used = re.findall(r"Using module file (\S+)", run.stdout)
    assert len(used) == 3, run.stdout
    prefix = str(installed_collections / "ansible_collections/proxshift") + "/"
    assert all(path.startswith(prefix) for path in used), used
