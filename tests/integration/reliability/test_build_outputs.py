"""scripts/lib/build-outputs.sh: the cache of build outputs that spares a fresh clone cargo's mtime-driven rebuild.

A hit must be the output of exactly the same sources, toolchain and flags; anything else must miss."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[3] / "scripts" / "lib" / "build-outputs.sh"


def sh(cwd: Path, script: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("RUSTFLAGS", "CARGO_", "BUILD_OUTPUTS"))}
    full.pop("PROXSHIFT_BUILD_CACHE", None)
    full.update(env or {})
    return subprocess.run(["bash", "-c", f". {LIB}\n{script}"], cwd=cwd, env=full, capture_output=True, text=True)


def key(tree: Path, env: dict | None = None, extra: str = "rustc 1.95.0") -> str:
    run = sh(tree, f'build_outputs_key build Cargo.toml Cargo.lock modules missing-dir -- "{extra}"', env)
    assert run.returncode == 0 and len(run.stdout.strip()) == 32, run
    return run.stdout.strip()


def make_tree(root: Path) -> Path:
    (root / "modules" / "a" / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text('[workspace]\nmembers = ["modules/*"]\n')
    (root / "Cargo.lock").write_text("version = 4\n")
    (root / "modules" / "a" / "src" / "lib.rs").write_text("pub fn a() {}\n")
    return root


def test_the_key_follows_contents_toolchain_and_flags_not_mtimes_or_paths(tmp_path):
    tree = make_tree(tmp_path / "clone-1")
    first = key(tree)
    # A fresh clone elsewhere: same contents, new mtimes, another path.
    clone = tmp_path / "clone-2"
    shutil.copytree(tree, clone)
    os.utime(clone / "modules" / "a" / "src" / "lib.rs", (1, 1))
    assert key(clone) == first

    (clone / "modules" / "a" / "src" / "lib.rs").write_text("pub fn a() { }\n")
    assert key(clone) != first, "an edited source kept its outputs"
    shutil.copytree(tree, tmp_path / "clone-3")
    (tmp_path / "clone-3" / "modules" / "a" / "src" / "b.rs").write_text("")
    assert key(tmp_path / "clone-3") != first, "a new source file kept its outputs"
    assert key(tree, extra="rustc 1.96.0") != first, "another toolchain kept its outputs"
    assert key(tree, env={"RUSTFLAGS": "-C target-cpu=native"}) != first, "other flags kept their outputs"
    assert key(tree, env={"CARGO_PROFILE_RELEASE_LTO": "false"}) != first, "another profile kept its outputs"
    assert key(tree) == first


def test_only_a_complete_entry_is_used_and_only_beside_the_machine_cargo_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x86_64-proxshift_proxmox").write_bytes(b"\x7fELF-one")
    (out / "tools-pvesim").write_bytes(b"\x7fELF-two")
    machine = {"CARGO_TARGET_DIR": str(tmp_path / "cache" / "cargo-target")}

    missing = sh(tmp_path, "build_outputs_fetch k1", machine)
    assert missing.returncode != 0 and not missing.stdout
    stored = sh(tmp_path, f"build_outputs_store k1 {out}/* && build_outputs_fetch k1", machine)
    assert stored.returncode == 0, stored
    entry = Path(stored.stdout.strip())
    assert entry == tmp_path / "cache" / "build-outputs" / "k1"
    assert (entry / "x86_64-proxshift_proxmox").read_bytes() == b"\x7fELF-one"
    assert (entry / "tools-pvesim").read_bytes() == b"\x7fELF-two"

    # A store that died half-way (no completion mark) is never used.
    (tmp_path / "cache" / "build-outputs" / "k2").mkdir()
    (tmp_path / "cache" / "build-outputs" / "k2" / "x86_64-proxshift_proxmox").write_bytes(b"half")
    assert sh(tmp_path, "build_outputs_fetch k2", machine).returncode != 0

    # A checkout's own target folder, or the switch, turns the cache off: nothing stored, nothing fetched.
    for env in ({"CARGO_TARGET_DIR": str(tmp_path / "target")}, {**machine, "PROXSHIFT_BUILD_CACHE": "0"}):
        assert sh(tmp_path, "build_outputs_fetch k1", env).returncode != 0
        assert sh(tmp_path, f"build_outputs_store k3 {out}/*", env).returncode == 0
    assert not (tmp_path / "cache" / "build-outputs" / "k3").exists()
