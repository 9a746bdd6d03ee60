"""Every change to a collection is released under a new version with a changelog: a collection whose shipped
files changed since its last release (the last commit that wrote its changelogs/changelog.yaml, which
`scripts/release.sh` does) carries a changelog fragment, or its galaxy.yml already names a version the
changelog has not released yet. Galaxy refuses a second upload of a version, and an execution environment
tells which project version it holds only by the collections' versions."""
from __future__ import annotations

import subprocess

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


def shipped(path: str) -> bool:
    return not path.startswith(NOT_A_CHANGE)


def test_a_changed_collection_has_a_fragment_or_an_unreleased_version():
    problems = []
    for coll in COLLECTION_NAMES:
        root = COLLECTIONS / coll
        changes = [p for p in changed_since_release(coll) if shipped(p)]
        if not changes:
            continue
        fragments = [p for p in (root / "changelogs/fragments").glob("*.y*ml")]
        version = yaml.safe_load((root / "galaxy.yml").read_text())["version"]
        released = yaml.safe_load((root / "changelogs/changelog.yaml").read_text())["releases"]
        if not fragments and version in released:
            problems.append(f"proxshift.{coll}: {len(changes)} shipped files changed since its release {version} "
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
