"""The three collections build into Galaxy tarballs that hold the licence, the binaries and nothing else,
install into a clean collections path, and run from there."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile

import yaml

from testlib import COLLECTION_NAMES, MODULE_BINARIES, REPO, ansible_env, install_collection_tarballs, tool

# Galaxy takes 20 MB. Each collection's modules are one multi-call binary per architecture, so a tarball
# grows with the code its modules add, not by a whole HTTP/TLS stack per module (openshift's seven modules
# were 17.2 MB as fourteen binaries).
TARBALL_BUDGET = 8 * 1024 * 1024
ELF_MAGIC = b"\x7fELF"
ELF_MACHINES = {"linux-x86_64": 62, "linux-aarch64": 183}
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
        # plugins/modules/ holds a documentation stub per module, and nothing else.
        assert {n for n in found if n.startswith("plugins/modules/")} == {f"plugins/modules/{m}.py" for m in own}
        binaries = {f"builds/{platform}/proxshift_{coll}" for platform in ELF_MACHINES}
        for name in binaries:
            data = read_member(tarball, name)
            assert data[:4] == ELF_MAGIC, f"{name} in {tarball.name} is no binary"
            machine = ELF_MACHINES[name.split("/")[1]]
            assert data[18:20] == machine.to_bytes(2, "little"), f"{name} is not for machine {machine}"
        # The shared action (one source, linked from each collection) is a file of its own in each tarball.
        shim = found["plugins/plugin_utils/binary_module.py"]
        assert shim.isfile(), f"{tarball.name}: plugins/plugin_utils/binary_module.py is not a regular file"
        assert read_member(tarball, shim.name) == \
            (REPO / "modules/collection-binaries/python/binary_module.py").read_bytes()
        junk = [n for n in found if JUNK.search(n)]
        assert not junk, f"{tarball.name} holds build output or caches: {junk}"
        # Executables are exactly the collection's binary, one per architecture (no stray scripts or tools).
        executables = {n for n, m in found.items() if m.isfile() and m.mode & 0o111}
        assert executables == binaries, executables


def semver(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.removesuffix("-dev").split("."))


def test_manifest_names_the_licence_and_version(built_tarballs):
    for coll, tarball in built_tarballs.items():
        galaxy = yaml.safe_load((REPO / "ansible_collections/proxshift" / coll / "galaxy.yml").read_text())
        info = json.loads(read_member(tarball, "MANIFEST.json"))["collection_info"]
        assert info["license"] == ["GPL-3.0-or-later"], info
        assert info["version"] == galaxy["version"]
        assert tarball.name == f"proxshift-{coll}-{galaxy['version']}.tar.gz"
        changelog = yaml.safe_load(read_member(tarball, "changelogs/changelog.yaml"))
        version = galaxy["version"]
        if version.endswith("-dev"):
            # A build between releases carries the changelog of the release it follows (release.sh opens the
            # next X.Y.Z-dev right after tagging).
            shown = max(changelog["releases"], key=semver)
            assert semver(shown) < semver(version), f"{coll}: {version} is not after its last release {shown}"
        else:
            shown = version
        assert shown in changelog["releases"], f"{coll}: no changelog entry for {shown}"
        rendered = read_member(tarball, "CHANGELOG.rst").decode()
        assert f"v{shown}" in rendered
        for module, owner in MODULE_BINARIES.items():
            # Every released module; one added since the last release (a -dev build) is in the next one's changelog.
            if owner == coll and semver(version_added(coll, module)) <= semver(shown):
                assert f"proxshift.{coll}.{module}" in rendered, f"{module} missing from {coll}'s CHANGELOG.rst"


def version_added(coll: str, module: str) -> str:
    """The module's `version_added`, from its documentation stub."""
    text = (REPO / "ansible_collections/proxshift" / coll / "plugins/modules" / f"{module}.py").read_text()
    return str(yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])["version_added"])


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


def test_ansible_doc_lists_every_module_with_its_short_description(installed_collections, tmp_path):
    env = ansible_env(tmp_path, {"ANSIBLE_COLLECTIONS_PATH": str(installed_collections)})
    for coll in COLLECTION_NAMES:
        proc = subprocess.run([tool("ansible-doc"), "-l", f"proxshift.{coll}", "--json"], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stdout + proc.stderr
        listed = json.loads(proc.stdout)
        root = REPO / "ansible_collections/proxshift" / coll / "plugins/modules"
        want = {}
        for module in (m for m, owner in MODULE_BINARIES.items() if owner == coll):
            docs = (root / f"{module}.py").read_text().split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0]
            want[f"proxshift.{coll}.{module}"] = yaml.safe_load(docs)["short_description"]
        assert listed == want, listed


def test_a_copy_without_its_build_names_the_command_that_installs_it(built_tarballs, tmp_path, run_playbook):
    # An installed copy whose binaries went missing, reached first on the collections path.
    dest = install_collection_tarballs({"hashi_vault": built_tarballs["hashi_vault"]}, tmp_path / "path")
    shutil.rmtree(dest / "ansible_collections/proxshift/hashi_vault/builds")
    play = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: read
      proxshift.hashi_vault.hashicorp_vault_info:
        url: http://127.0.0.1:9
        path: x
"""
    env = {"ANSIBLE_COLLECTIONS_PATH": str(dest)}
    first = run_playbook(play, env=env)
    msg = first.task("read")["msg"]
    command = re.search(r"`(ansible-galaxy collection install --force -p \S+ (\S+\.tar\.gz))`", msg)
    assert command and command.group(2) == built_tarballs["hashi_vault"].name, msg
    galaxy = ansible_env(tmp_path, env)
    # Without --force the copy counts as installed: nothing happens, which is why the message says --force.
    plain = subprocess.run([tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(dest),
                            str(built_tarballs["hashi_vault"])], env=galaxy, capture_output=True, text=True)
    assert "Nothing to do" in plain.stdout, plain.stdout + plain.stderr
    args = command.group(1).split()[1:-1] + [str(built_tarballs["hashi_vault"])]
    fixed = subprocess.run([tool("ansible-galaxy"), *args], cwd=str(tmp_path), env=galaxy, capture_output=True,
                           text=True)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    second = run_playbook(play, env=env)
    assert "is missing" not in second.task("read")["msg"], second.task("read")  # it ran: Vault is unreachable
