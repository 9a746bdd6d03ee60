"""Every change to a collection is released under a new version with a changelog: a collection whose shipped
files changed since its last release (the last commit that wrote its changelogs/changelog.yaml, which
`scripts/release.sh` does) carries a changelog fragment, and builds as a `-dev` version until it is released. Galaxy
refuses a second upload of a version, and an execution environment
tells which project version it holds only by the collections' versions. The module binaries in builds/ ship
too: a change to the Rust sources a collection's binary is built from counts as a change of that collection."""
from __future__ import annotations

import re
import subprocess
import tomllib

import yaml

from testlib import COLLECTION_NAMES, REPO

COLLECTIONS = REPO / "ansible_collections" / "proxshift"
# Files under a collection that do not ship or are the changelog itself.
NOT_A_CHANGE = ("changelogs/", "tests/", "CHANGELOG.rst")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def changed_since_release(coll: str) -> list[str]:
    """Shipped files of `coll` changed (committed, staged, unstaged or new) since its last release commit."""
    root = f"ansible_collections/proxshift/{coll}"
    release = git("log", "-1", "--format=%H", "--", f"{root}/changelogs/changelog.yaml").strip()
    assert release, f"{coll}: no commit ever wrote its changelogs/changelog.yaml"
    changed = git("diff", "--name-only", release, "--", root).split()
    changed += git("ls-files", "--others", "--exclude-standard", "--", root).split()
    return sorted({p.removeprefix(root + "/") for p in changed} - {""})


def crate_dirs() -> dict[str, str]:
    """Each workspace crate's name as Rust code spells it (`pve_client`) → its folder under modules/."""
    out = {}
    for manifest in (REPO / "modules").glob("*/Cargo.toml"):
        out[tomllib.loads(manifest.read_text())["package"]["name"].replace("-", "_")] = manifest.parent.name
    return out


def binary_sources(coll: str) -> list[str]:
    """The repository paths builds/*/proxshift_COLL is compiled from: its bin file, the crates it calls and their
    workspace dependencies, transitively (sources and manifests; tests and benches do not ship)."""
    dirs = crate_dirs()
    main = f"modules/collection-binaries/src/bin/proxshift_{coll}.rs"
    text = (REPO / main).read_text()
    todo = [c for c in dirs if c != "collection_binaries" and re.search(rf"\b{c}::", text)]
    seen: set[str] = set()
    while todo:
        crate = todo.pop()
        if crate in seen:
            continue
        seen.add(crate)
        manifest = tomllib.loads((REPO / "modules" / dirs[crate] / "Cargo.toml").read_text())
        todo += [d.replace("-", "_") for d in manifest.get("dependencies", {}) if d.replace("-", "_") in dirs]
    paths = [main, "modules/collection-binaries/src/lib.rs"]
    for crate in sorted(seen):
        paths += [f"modules/{dirs[crate]}/src", f"modules/{dirs[crate]}/Cargo.toml"]
    return paths


def binary_changed_since_release(coll: str) -> list[str]:
    root = f"ansible_collections/proxshift/{coll}"
    release = git("log", "-1", "--format=%H", "--", f"{root}/changelogs/changelog.yaml").strip()
    sources = binary_sources(coll)
    changed = git("diff", "--name-only", release, "--", *sources).split()
    changed += git("ls-files", "--others", "--exclude-standard", "--", *sources).split()
    return sorted(set(changed))


def test_the_binary_sources_of_each_collection_are_known():
    """The walk finds each collection's own modules and the shared crates, and not another collection's modules."""
    proxmox, vault, openshift = (binary_sources(c) for c in ("proxmox", "hashi_vault", "openshift"))
    assert "modules/pve-client/src" in proxmox and "modules/ansible-module/src" in proxmox
    assert "modules/vault-client/src" in vault and "modules/pve-client/src" not in vault
    assert "modules/ocp_manifests/src" in openshift and "modules/kube-client/src" in openshift
    assert "modules/ocp_manifests/src" not in proxmox


def shipped(path: str) -> bool:
    return not path.startswith(NOT_A_CHANGE)


def test_a_changed_collection_has_a_fragment():
    """A change since the release needs a fragment saying what changed; galaxy.yml alone (the `-dev` version that
    release.sh opens after the tag) is no change."""
    problems = []
    for coll in COLLECTION_NAMES:
        root = COLLECTIONS / coll
        changes = [p for p in changed_since_release(coll) if shipped(p) and p != "galaxy.yml"]
        changes += binary_changed_since_release(coll)
        if changes and not list((root / "changelogs/fragments").glob("*.y*ml")):
            problems.append(f"proxshift.{coll}: {len(changes)} shipped files changed since its last release "
                            f"({', '.join(changes[:5])}, ...) but changelogs/fragments/ is empty: add a fragment")
    assert not problems, "\n".join(problems)


def test_fragments_name_known_sections():
    for coll in COLLECTION_NAMES:
        root = COLLECTIONS / coll
        config = yaml.safe_load((root / "changelogs/config.yaml").read_text())
        sections = {s[0] for s in config["sections"]} | {config["prelude_section_name"], config["trivial_section_name"]}
        for fragment in sorted((root / "changelogs/fragments").glob("*.y*ml")):
            data = yaml.safe_load(fragment.read_text())
            assert isinstance(data, dict) and data, fragment
            assert set(data) <= sections, f"{fragment}: {sorted(set(data) - sections)} are not changelog sections"
            for section, entries in data.items():
                if section != config["prelude_section_name"]:
                    assert isinstance(entries, list) and all(isinstance(e, str) for e in entries), fragment


def released_versions(coll: str) -> list[str]:
    return list(yaml.safe_load((COLLECTIONS / coll / "changelogs/changelog.yaml").read_text())["releases"])


def semver(version: str) -> tuple[int, int, int]:
    return tuple(int(n) for n in version.split("-")[0].split("."))


def test_a_build_between_releases_carries_a_development_version():
    """galaxy.yml names a released version only on the release commit itself; any later change to the collection
    (its files or its binary's sources) builds as `X.Y.Z-dev` above the last release, so a tarball or an EE built
    from main cannot be taken for the release (scripts/release.sh opens the next `-dev` right after tagging)."""
    problems = []
    for coll in COLLECTION_NAMES:
        version = yaml.safe_load((COLLECTIONS / coll / "galaxy.yml").read_text())["version"]
        released = released_versions(coll)
        last = max(released, key=semver)
        changes = [p for p in changed_since_release(coll) if shipped(p)] + binary_changed_since_release(coll)
        if version in released:
            if changes:
                problems.append(f"proxshift.{coll}: galaxy.yml says the released {version}, but {len(changes)} "
                                f"shipped files changed since ({', '.join(changes[:3])}, ...): make it a -dev version")
        elif not re.fullmatch(r"\d+\.\d+\.\d+-dev", version) or semver(version) <= semver(last):
            problems.append(f"proxshift.{coll}: galaxy.yml's unreleased {version} is not X.Y.Z-dev above the last "
                            f"release {last}")
    assert not problems, "\n".join(problems)


def test_fragments_write_code_as_rst_literals():
    """antsibull-changelog renders fragments as reStructuredText: code is ``double``-backticked (or C()/O()-marked,
    as community collections write it); a single backtick is RST's interpreted text and renders as italics."""
    single = re.compile(r"(?<!`)`(?!`)[^`]+(?<!`)`(?!`)")
    problems = []
    for coll in COLLECTION_NAMES:
        for fragment in sorted((COLLECTIONS / coll / "changelogs/fragments").glob("*.y*ml")):
            for section, entries in (yaml.safe_load(fragment.read_text()) or {}).items():
                for entry in entries if isinstance(entries, list) else [entries]:
                    problems += [f"{fragment.name} ({section}): {m.group(0)}" for m in single.finditer(str(entry))]
    assert not problems, "single-backticked code in changelog fragments (write ``code``):\n" + "\n".join(problems)
