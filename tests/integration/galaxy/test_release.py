"""`make release` (scripts/release.sh) on a copy of the project: refuses what is no release, and otherwise bumps
the version, writes the changelog from the fragments with antsibull-changelog, points the execution environment
at the new tarball and builds it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from testlib import REPO, VENV, ansible_env, tool


@pytest.fixture
def project(tmp_path) -> Path:
    """The files the script touches: itself, the EE definition and the proxmox collection (no binaries)."""
    tool("antsibull-changelog")  # fails naming `make venv` when it is missing
    copy = tmp_path / "project"
    (copy / "scripts").mkdir(parents=True)
    for script in ("release.sh", "ee_galaxy.py"):
        shutil.copy2(REPO / "scripts" / script, copy / "scripts" / script)
    (copy / "awx").mkdir()
    for ee in ("execution-environment.yml", "execution-environment-galaxy.yml"):
        shutil.copy2(REPO / "awx" / ee, copy / "awx" / ee)
    for other in ("hashi_vault", "openshift"):  # ee_galaxy.py reads every collection's last release
        log = copy / f"ansible_collections/proxshift/{other}/changelogs/changelog.yaml"
        log.parent.mkdir(parents=True)
        shutil.copy2(REPO / f"ansible_collections/proxshift/{other}/changelogs/changelog.yaml", log)
    src = REPO / "ansible_collections/proxshift/proxmox"
    shutil.copytree(src, copy / "ansible_collections/proxshift/proxmox",
                    ignore=shutil.ignore_patterns("builds", "__pycache__", ".plugin-cache.yaml"))
    return copy


def release(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = ansible_env(project, {"PATH": f"{VENV / 'bin'}:/usr/bin:/bin"})
    return subprocess.run(["bash", str(project / "scripts/release.sh"), *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)


def current(project: Path) -> str:
    return yaml.safe_load((project / "ansible_collections/proxshift/proxmox/galaxy.yml").read_text())["version"]


def last_release(project: Path) -> str:
    """The newest version changelogs/changelog.yaml has released (galaxy.yml holds the development version after it)."""
    releases = yaml.safe_load((project / "ansible_collections/proxshift/proxmox/changelogs/changelog.yaml").read_text())
    return max(releases["releases"], key=lambda v: tuple(int(n) for n in v.split(".")))


def next_dev(version: str) -> str:
    major, minor, patch = (int(n) for n in version.split("."))
    return f"{major}.{minor}.{patch + 1}-dev"


def test_what_is_no_release_is_refused_naming_why(project):
    version, released = current(project), last_release(project)
    assert version == next_dev(released) or version.endswith("-dev"), f"galaxy.yml {version} after release {released}"
    for args, reason in [(("proxmox", "1.2"), "is not a semantic version"),
                         (("proxmox", version), "is not a semantic version X.Y.Z"),
                         (("proxmox", released), f"is not above proxshift.proxmox's last release {released}"),
                         (("proxmox", "0.0.1"), "is not above"),
                         (("nope", "9.0.0"), "no collection 'nope'"),
                         (("proxmox",), "usage:")]:
        proc = release(project, *args)
        assert proc.returncode == 2 and reason in proc.stderr, (args, proc.stderr)
    fragments = project / "ansible_collections/proxshift/proxmox/changelogs/fragments"
    for fragment in fragments.glob("*.yml"):
        fragment.unlink()
    proc = release(project, "proxmox", "99.0.0")
    assert proc.returncode == 2 and "fragments/ is empty" in proc.stderr, proc.stderr
    assert current(project) == version, "a refused release changed galaxy.yml"


def test_a_release_bumps_writes_the_changelog_and_builds_the_tarball(project):
    """The release's tarball carries the release's version; galaxy.yml and the EE then name the next development
    version, and the README keeps the released tarball's name."""
    old, released = current(project), last_release(project)
    root = project / "ansible_collections/proxshift/proxmox"
    # A minor change to release, whatever fragments the repository holds (a breaking one would need a major bump).
    for fragment in (root / "changelogs/fragments").glob("*.yml"):
        fragment.unlink()
    (root / "changelogs/fragments/test-change.yml").write_text('minor_changes:\n  - "proxmox_vm - a test change."\n')
    fragments = sorted(p.name for p in (root / "changelogs/fragments").glob("*.yml"))
    major, minor, _ = (int(n) for n in released.split("."))
    new = f"{major}.{minor + 1}.0"
    proc = release(project, "proxmox", new)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert current(project) == f"{major}.{minor + 1}.1-dev" and last_release(project) == new
    changelog = yaml.safe_load((root / "changelogs/changelog.yaml").read_text())
    assert sorted(changelog["releases"][new]["fragments"]) == fragments
    assert f"v{new}" in (root / "CHANGELOG.rst").read_text()
    assert not list((root / "changelogs/fragments").glob("*.yml")), "the released fragments stay"
    ee = (project / "awx/execution-environment.yml").read_text()
    assert f"proxshift-proxmox-{major}.{minor + 1}.1-dev.tar.gz" in ee and f"proxshift-proxmox-{old}.tar.gz" not in ee
    readme = (root / "README.md").read_text()
    assert f"proxshift-proxmox-{new}.tar.gz" in readme and f"proxshift-proxmox-{released}.tar.gz" not in readme
    assert "a test change" in (root / "CHANGELOG.rst").read_text()
    galaxy_ee = yaml.safe_load((project / "awx/execution-environment-galaxy.yml").read_text())
    assert {"name": "proxshift.proxmox", "version": f"=={new}"} in galaxy_ee["dependencies"]["galaxy"]["collections"]
    assert (project / f"build/proxshift-proxmox-{new}.tar.gz").is_file()


def test_the_fragments_decide_the_smallest_version(project):
    """A breaking fragment needs a major release, a new feature a minor one; a smaller bump is refused, naming the
    fragment, and changes nothing."""
    old = current(project)
    major, minor, patch = (int(n) for n in last_release(project).split("."))
    fragments = project / "ansible_collections/proxshift/proxmox/changelogs/fragments"
    for fragment in fragments.glob("*.yml"):
        fragment.unlink()
    (fragments / "fix.yml").write_text('bugfixes:\n  - "proxmox_vm - a fix."\n')
    (fragments / "feature.yml").write_text('minor_changes:\n  - "proxmox_vm - a feature."\n')
    proc = release(project, "proxmox", f"{major}.{minor}.{patch + 1}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"a minor release, {major}.{minor + 1}.0 or above: feature.yml (minor_changes)" in proc.stderr, proc.stderr
    (fragments / "break.yml").write_text('breaking_changes:\n  - "proxmox_vm - an option renamed."\n')
    proc = release(project, "proxmox", f"{major}.{minor + 1}.0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"a major release, {major + 1}.0.0 or above: break.yml (breaking_changes)" in proc.stderr, proc.stderr
    assert current(project) == old, "a refused release changed galaxy.yml"


def test_a_release_in_a_checkout_is_committed_and_tagged(project):
    """In a git checkout the release is one commit of its files, tagged proxshift.proxmox-VERSION."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=project,
                              capture_output=True, text=True, check=True).stdout
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "before")
    (project / "notes.txt").write_text("not part of the release\n")
    root = project / "ansible_collections/proxshift/proxmox"
    (root / "changelogs/fragments/test-change.yml").write_text('major_changes:\n  - "proxmox_vm - a big change."\n')
    major, _, _ = (int(n) for n in last_release(project).split("."))
    new = f"{major + 1}.0.0"
    env_git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@example.com"}
    env = ansible_env(project, {"PATH": f"{VENV / 'bin'}:/usr/bin:/bin", **env_git})
    proc = subprocess.run(["bash", str(project / "scripts/release.sh"), "proxmox", new], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git("tag", "--list").split() == [f"proxshift.proxmox-{new}"]
    assert git("log", "-1", "--format=%s", f"proxshift.proxmox-{new}").strip() == f"Release proxshift.proxmox {new}"
    files = git("show", "--name-only", "--format=", f"proxshift.proxmox-{new}").split()
    assert "ansible_collections/proxshift/proxmox/galaxy.yml" in files
    released_galaxy = git("show", f"proxshift.proxmox-{new}:ansible_collections/proxshift/proxmox/galaxy.yml")
    assert f"\nversion: {new}\n" in released_galaxy
    # The commit after the tag opens the next development version; nothing else is in it.
    dev = next_dev(new)
    assert git("log", "-1", "--format=%s", "HEAD").strip() == f"proxshift.proxmox: open {dev} after the {new} release"
    assert git("rev-parse", "HEAD~1").strip() == git("rev-list", "-n1", f"proxshift.proxmox-{new}").strip()
    assert "awx/execution-environment-galaxy.yml" in files
    assert sorted(git("show", "--name-only", "--format=", "HEAD").split()) == [
        "ansible_collections/proxshift/proxmox/galaxy.yml", "awx/execution-environment.yml"]
    assert current(project) == dev
    assert "ansible_collections/proxshift/proxmox/changelogs/fragments/test-change.yml" not in git("ls-files")
    assert "notes.txt" not in files and "?? notes.txt" in git("status", "--porcelain")
