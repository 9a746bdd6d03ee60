"""The aarch64 builds of every module, run under Debian's qemu-user (`qemu-aarch64-static`, with Debian's
aarch64 glibc as the sysroot; both installed by scripts/deps/qemu.sh), and the action shim that sends
each target the build for its machine.

qemu is called explicitly: registering it with binfmt_misc needs a privileged host, which CI is not
bound to be. So the shim's choice is shown by the file it sent (ANSIBLE_KEEP_REMOTE_FILES keeps it),
and that very file then runs under qemu with the arguments Ansible wrote beside it. The target's
machine type comes from a `uname` on PATH that prints what an aarch64 (or unsupported) host prints.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from services import running_pvesim
from testlib import MODULE_BINARIES, REPO, module_binary

QEMU = Path("/usr/bin/qemu-aarch64-static")
SYSROOT = Path("/usr/aarch64-linux-gnu")  # libc6-arm64-cross: the builds link glibc dynamically
EM_AARCH64 = 183  # ELF e_machine
MAX_BYTES = 7 * 1024 * 1024  # a collection's multi-call binary (scripts/build.sh's budget)


def aarch64_binary(name: str) -> Path:
    """A link named `name` to the aarch64 build of its collection's binary (it runs the module it is started as)."""
    return module_binary(name, "aarch64")


def elf_machine(path: Path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1, f"{path} is not a 64-bit little-endian ELF"
    return int.from_bytes(head[18:20], "little")


def qemu() -> list[str]:
    if not QEMU.exists() or not (SYSROOT / "lib/ld-linux-aarch64.so.1").exists():
        pytest.fail(f"{QEMU} or the aarch64 glibc in {SYSROOT} is missing: run scripts/deps/qemu.sh "
                    "(part of `make test-deps`)")
    return [str(QEMU), "-L", str(SYSROOT)]


def run_under_qemu(binary: Path, *args: str) -> tuple[dict, int]:
    proc = subprocess.run([*qemu(), str(binary), *args], capture_output=True, text=True, timeout=300)
    try:
        return json.loads(proc.stdout), proc.returncode
    except json.JSONDecodeError as err:
        raise AssertionError(f"{binary.name} under qemu printed no JSON ({err}):\n{proc.stdout}\n{proc.stderr}")


@pytest.mark.parametrize("module", sorted(MODULE_BINARIES))
def test_aarch64_build_is_portable(module):
    binary = aarch64_binary(module)
    assert elf_machine(binary) == EM_AARCH64
    assert elf_machine(module_binary(module)) == 62
    assert binary.stat().st_size <= MAX_BYTES
    dynamic = subprocess.run(["readelf", "-W", "--dynamic", "--dyn-syms", str(binary)],
                             capture_output=True, text=True, check=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    assert not {lib for lib in needed if "ssl" in lib or "crypto" in lib}, needed
    versions = {tuple(int(n) for n in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", dynamic)}
    assert versions and max(versions) <= (2, 17), sorted(versions)


@pytest.mark.parametrize("module", sorted(MODULE_BINARIES))
def test_aarch64_build_speaks_the_protocol_under_qemu(module, tmp_path):
    spec = subprocess.run([*qemu(), str(aarch64_binary(module)), "--argument-spec"],
                          capture_output=True, text=True, timeout=300, check=True).stdout
    native = subprocess.run([str(module_binary(module)), "--argument-spec"],
                            capture_output=True, text=True, check=True).stdout
    assert json.loads(spec) == json.loads(native)

    args = tmp_path / "args"
    args.write_text(json.dumps({"surely_not_an_option": 1, "_ansible_check_mode": True}))
    result, rc = run_under_qemu(aarch64_binary(module), str(args))
    assert rc == 1 and result["failed"] is True and "surely_not_an_option" in result["msg"], result


@pytest.fixture
def pvesim(tmp_path):
    with running_pvesim(tmp_path) as sim:
        yield sim


def info_args(sim) -> dict:
    return {
        "api_host": sim.host, "api_port": sim.port, "api_token_id": sim.token_id,
        "api_token_secret": sim.token_secret, "ca_path": str(sim.ca_path), "vmid": 100,
    }


def test_aarch64_build_reads_pvesim_over_tls_as_the_x86_64_build_does(pvesim, tmp_path):
    args = tmp_path / "args"
    args.write_text(json.dumps(info_args(pvesim)))
    emulated, rc = run_under_qemu(aarch64_binary("proxmox_vm_info"), str(args))
    assert rc == 0, emulated
    native = json.loads(subprocess.run([str(module_binary("proxmox_vm_info")), str(args)],
                                       capture_output=True, text=True, check=True).stdout)
    assert emulated["vms"] and emulated["vms"] == native["vms"]
    assert pvesim.token_secret not in json.dumps(emulated)


def fake_uname(tmp_path: Path, system: str, machine: str) -> dict:
    """An env whose PATH starts with a `uname -sm` that answers like a `system` `machine` host."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    uname = bin_dir / "uname"
    uname.write_text(f"#!/bin/sh\necho '{system} {machine}'\n")
    uname.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_the_action_sends_an_aarch64_target_the_aarch64_build(run_playbook, ansible_venv, pvesim, tmp_path):
    kept = tmp_path / "kept-remote"
    env = fake_uname(tmp_path, "Linux", "aarch64")
    env["PATH"] = f"{env['PATH'].split(':', 1)[0]}:{ansible_venv / 'bin'}:{os.environ['PATH']}"
    env.update({"ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TEMP": str(kept)})
    info = info_args(pvesim)
    play = pvesim.play(f"""
        - name: info
          proxshift.proxmox.proxmox_vm_info: {{vmid: {info['vmid']}}}
          ignore_errors: true
    """)
    run_playbook(play, env=env)
    sent = list(kept.rglob("AnsiballZ_proxshift_proxmox"))
    assert len(sent) == 1, sorted(str(p) for p in kept.rglob("*"))
    assert elf_machine(sent[0]) == EM_AARCH64
    assert sent[0].read_bytes() == aarch64_binary("proxmox_vm_info").read_bytes()
    # Without binfmt_misc this host cannot exec it; the same file with the args Ansible wrote runs under qemu
    # (the collection binary picks the module from the args' _ansible_module_name).
    result, rc = run_under_qemu(sent[0], str(sent[0].parent / "args"))
    assert rc == 0 and result["vms"][0]["vmid"] == 100, result


def test_the_action_sends_an_x86_64_target_the_x86_64_build(run_playbook, ansible_venv, pvesim, tmp_path):
    env = fake_uname(tmp_path, "Linux", "x86_64")
    env["PATH"] = f"{env['PATH'].split(':', 1)[0]}:{ansible_venv / 'bin'}:{os.environ['PATH']}"
    run = run_playbook(pvesim.play("- name: info\n  proxshift.proxmox.proxmox_vm_info: {vmid: 100}\n"), env=env)
    assert run.rc == 0, run.output
    assert run.task("info")["vms"][0]["vmid"] == 100


@pytest.mark.parametrize("system,machine", [("Linux", "ppc64le"), ("Darwin", "arm64")])
def test_the_action_refuses_a_platform_without_a_build(run_playbook, ansible_venv, tmp_path, system, machine):
    env = fake_uname(tmp_path, system, machine)
    env["PATH"] = f"{env['PATH'].split(':', 1)[0]}:{ansible_venv / 'bin'}:{os.environ['PATH']}"
    run = run_playbook("""
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: info
              proxshift.proxmox.proxmox_vm_info: {api_host: 127.0.0.1, api_token_id: a@pve!b, api_token_secret: c}
    """, env=env)
    assert run.rc != 0
    msg = run.task("info")["msg"]
    assert f"reports {system} {machine}" in msg and "Linux on x86_64 or aarch64" in msg, msg


def load_binary_module():
    path = REPO / "ansible_collections/proxshift/proxmox/plugins/plugin_utils/binary_module.py"
    spec = importlib.util.spec_from_file_location("binary_module_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_controller_side_plugins_pick_the_controllers_build():
    """The inventory and lookup plugins run their binary on the controller, chosen by binary_path()."""
    bm = load_binary_module()
    root = "/c/proxmox"
    assert bm.binary_path(root, "Linux", "x86_64") == "/c/proxmox/builds/linux-x86_64/proxshift_proxmox"
    assert bm.binary_path(root, "Linux", "aarch64") == "/c/proxmox/builds/linux-aarch64/proxshift_proxmox"
    assert bm.binary_path(root, "Linux", "arm64") == "/c/proxmox/builds/linux-aarch64/proxshift_proxmox"
    with pytest.raises(bm.UnsupportedPlatform, match="reports Darwin arm64"):
        bm.binary_path(root, "Darwin", "arm64")
    # Both plugins go through run_backend, which picks the build for the controller's own platform.
    assert "binary_path(COLLECTION_ROOT, platform.system(), platform.machine())" in \
        (REPO / "ansible_collections/proxshift/proxmox/plugins/plugin_utils/binary_module.py").read_text()
    for coll, flag, plugin in [("proxmox", "--inventory", "plugins/inventory/proxmox.py"),
                               ("hashi_vault", "--lookup", "plugins/lookup/kv.py")]:
        text = (REPO / "ansible_collections/proxshift" / coll / plugin).read_text()
        assert f"proxshift.{coll}.plugins.plugin_utils.binary_module import backend_options, run_backend" in text
        assert f'run_backend("{flag}", ' in text, plugin
