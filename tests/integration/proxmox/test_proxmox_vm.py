"""proxshift.proxmox.proxmox_vm through real ansible-playbook against pvesim (HTTPS, its own CA).

Every test asserts on the module's results and on the simulator's state and request log; check mode
must leave no write in that log.
"""
from __future__ import annotations

import hashlib
import textwrap


UEFI_NODE = """
  cpu: host
  cores: {cores}
  memory: {memory}
  balloon: 0
  bios: ovmf
  machine: q35
  efidisk: {{storage: local-lvm, efitype: 4m, pre_enrolled_keys: false}}
  scsihw: virtio-scsi-single
  disks:
    - {{slot: scsi0, storage: local-lvm, size: {size}, ssd: true, iothread: true, discard: true, serial: root}}
  nics:
    - {{slot: net0, bridge: vmbr0, vlan: {vlan}, mac: "{mac}"}}
  cdrom: {{iso: "local:iso/agent.x86_64.iso"}}
  boot: [scsi0, ide2]
  ostype: l26
  onboot: true
"""


def sno_task(name="SNO node", *, cores=8, memory=16384, size="120G", vlan=20, mac="BC:24:11:00:70:00",
             extra=""):
    spec = UEFI_NODE.format(cores=cores, memory=memory, size=size, vlan=vlan, mac=mac)
    return f"""
- name: {name}
  proxshift.proxmox.proxmox_vm:
    name: sno-0
    node: pve1
    vmid_range: [4100, 4199]
    owner_tag: ocp-sno
{_indent(spec, 4)}
{_indent(extra, 4)}
  register: r
"""


def _indent(text: str, n: int) -> str:
    text = textwrap.dedent(text).strip("\n")
    return "\n".join((" " * n + line) if line.strip() else "" for line in text.splitlines())


def test_sno_create_rerun_change_check_and_diff(pvesim, run_playbook):
    run = run_playbook(pvesim.play(sno_task("Create") + sno_task("Rerun")))
    assert run.rc == 0, run.output
    created = run.task("Create")
    assert created["changed"] is True and created["created"] is True
    assert created["vmid"] == 4100 and created["node"] == "pve1"
    assert created["mac_addresses"] == {"net0": "BC:24:11:00:70:00"}
    assert run.task("Rerun")["changed"] is False
    cfg = pvesim.vm(4100)
    assert "efitype=4m" in cfg["efidisk0"] and cfg["bios"] == "ovmf" and cfg["machine"] == "q35"
    assert cfg["tags"] == "ocp-sno"

    # Check mode + diff: reports the change, writes nothing.
    seq = pvesim.last_seq()
    run = run_playbook(pvesim.play(sno_task("Preview", memory=24576, size="150G")), check=True, diff=True)
    assert run.rc == 0, run.output
    preview = run.task("Preview")
    assert preview["changed"] is True
    assert preview["changed_keys"] == ["memory", "scsi0"]
    assert preview["diff"]["before"]["memory"] == "16384" and preview["diff"]["after"]["memory"] == "24576"
    assert pvesim.writes_since(seq) == []
    assert pvesim.vm(4100)["memory"] == "16384"

    # One change: only that key is sent.
    seq = pvesim.last_seq()
    run = run_playbook(pvesim.play(sno_task("More memory", memory=24576)))
    assert run.rc == 0, run.output
    assert run.task("More memory")["changed_keys"] == ["memory"]
    assert pvesim.writes_since(seq) == ["POST /nodes/pve1/qemu/4100/config"]
    writes = [r for r in pvesim.requests(seq) if r["method"] == "POST"]
    assert set(writes[0]["params"]) - {"node", "vmid", "digest"} == {"memory"}

    # Disk grow and VLAN change, MAC kept.
    run = run_playbook(pvesim.play(sno_task("Disk and VLAN", memory=24576, size="150G", vlan=30)))
    assert run.rc == 0, run.output
    assert run.task("Disk and VLAN")["changed_keys"] == ["net0", "scsi0"]
    cfg = pvesim.vm(4100)
    assert "size=150G" in cfg["scsi0"]
    assert cfg["net0"] == "virtio=BC:24:11:00:70:00,bridge=vmbr0,tag=30"


def test_compact_cluster_cloned_with_fixed_macs_and_placed(pvesim, run_playbook):
    # Proxmox clones to another node only from a source whose volumes are all on shared storage
    # (the lab template's are on local-lvm), so the cluster is cloned from such a VM.
    source = """
- name: Shared source
  proxshift.proxmox.proxmox_vm:
    name: c1-source
    node: pve1
    disks: [{slot: scsi0, storage: nfs-shared, size: 32G}]
    owner_tag: c1-source
"""
    run = run_playbook(pvesim.play(source))
    assert run.rc == 0, run.output
    vms = "\n".join(
        f"      - {{name: c1-m{i}, nics: [{{slot: net0, bridge: vmbr0, mac: 'BC:24:11:00:80:0{i}'}}]}}"
        for i in range(3)
    )
    task = f"""
- name: Compact cluster
  proxshift.proxmox.proxmox_vm:
    clone: {{name: c1-source, full: true, storage: nfs-shared}}
    allowed_nodes: [pve1, pve2, pve3]
    vmid_range: [4200, 4299]
    cores: 8
    memory: 16384
    disks: [{{slot: scsi0, storage: nfs-shared, size: 120G, iothread: true}}]
    owner_tag: c1
    parallel: 3
    vms:
{vms}
  register: r
"""
    run = run_playbook(pvesim.play(task))
    assert run.rc == 0, run.output
    res = run.task("Compact cluster")
    placed = [(v["name"], v["node"], v["vmid"], v["cloned"]) for v in res["vms"]]
    assert placed == [("c1-m0", "pve2", 4200, True), ("c1-m1", "pve1", 4201, True), ("c1-m2", "pve3", 4202, True)]
    for i, v in enumerate(res["vms"]):
        assert v["mac_addresses"] == {"net0": f"BC:24:11:00:80:0{i}"}
        cfg = pvesim.vm(v["vmid"])
        assert cfg["net0"] == f"virtio=BC:24:11:00:80:0{i},bridge=vmbr0"
        assert "size=120G" in cfg["scsi0"] and cfg["cores"] == "8"
        assert "c1" in cfg["tags"].split(";")

    seq = pvesim.last_seq()
    run = run_playbook(pvesim.play(task.replace("Compact cluster", "Again")))
    assert run.rc == 0, run.output
    assert run.task("Again")["changed"] is False
    assert pvesim.writes_since(seq) == []


def test_agent_iso_upload_and_attach(pvesim, run_playbook, tmp_path):
    iso = tmp_path / "agent.x86_64.iso"
    iso.write_bytes(b"\x00" * 8192 + b"ignition")
    digest = hashlib.sha256(iso.read_bytes()).hexdigest()
    extra = f"""
agent_iso:
  src: {iso}
  storage: local
"""
    run = run_playbook(pvesim.play(sno_task("With ISO", extra=extra) + sno_task("Again", extra=extra)))
    assert run.rc == 0, run.output
    first = run.task("With ISO")
    assert first["iso_uploaded"] is True
    assert first["iso_volid"] == f"local:iso/agent.x86_64-{digest[:12]}.iso"
    assert pvesim.vm(4100)["ide2"] == f"{first['iso_volid']},media=cdrom"
    again = run.task("Again")
    assert again["changed"] is False and again["iso_uploaded"] is False
    uploads = [r for r in pvesim.requests() if r["path"].endswith("/upload")]
    assert len(uploads) == 1


def test_pending_changes_reported_and_applied_on_request(pvesim, run_playbook):
    assert run_playbook(pvesim.play(sno_task("Create"))).rc == 0
    pvesim.api("POST", "nodes/pve1/qemu/4100/status/start")
    run = run_playbook(pvesim.play(sno_task("More cores", cores=12) + sno_task("Still pending", cores=12)))
    assert run.rc == 0, run.output
    more = run.task("More cores")
    assert more["changed"] is True and more["reboot_required"] is True and more["pending_keys"] == ["cores"]
    still = run.task("Still pending")
    assert still["changed"] is False and still["reboot_required"] is True
    run = run_playbook(pvesim.play(sno_task("Apply", cores=12, extra="apply_pending: reboot")))
    assert run.rc == 0, run.output
    applied = run.task("Apply")
    assert applied["changed"] is True and applied["reboot_required"] is False
    assert any(":qmreboot:4100:" in t for t in applied["task_ids"])


def test_absent_needs_force_for_running_vms_and_unowned_vms_are_refused(pvesim, run_playbook):
    assert run_playbook(pvesim.play(sno_task("Create"))).rc == 0
    pvesim.api("POST", "nodes/pve1/qemu/4100/status/start")
    seq = pvesim.last_seq()
    tasks = """
- name: Without force
  proxshift.proxmox.proxmox_vm: {name: sno-0, state: absent, owner_tag: ocp-sno}
  register: noforce
  ignore_errors: true
- name: Unowned bastion
  proxshift.proxmox.proxmox_vm: {vmid: 100, memory: 4096}
  register: unowned
  ignore_errors: true
- name: Unowned delete
  proxshift.proxmox.proxmox_vm: {vmid: 100, state: absent, force: true}
  register: unowned_del
  ignore_errors: true
"""
    run = run_playbook(pvesim.play(tasks))
    assert "is running; set force: true" in run.task("Without force")["msg"]
    assert "does not carry the ownership tag 'proxshift'" in run.task("Unowned bastion")["msg"]
    assert "refusing to delete" in run.task("Unowned delete")["msg"]
    assert pvesim.writes_since(seq) == []
    assert pvesim.vm(4100) is not None and pvesim.vm(100) is not None

    run = run_playbook(pvesim.play("""
- name: With force
  proxshift.proxmox.proxmox_vm: {name: sno-0, state: absent, force: true, owner_tag: ocp-sno}
- name: Already gone
  proxshift.proxmox.proxmox_vm: {name: sno-0, state: absent, owner_tag: ocp-sno}
"""))
    assert run.rc == 0, run.output
    assert run.task("With force")["deleted"] is True
    assert run.task("Already gone")["changed"] is False
    assert pvesim.vm(4100) is None


def test_faults_give_clear_errors_and_reruns_converge(pvesim, run_playbook):
    # A failing create task: the task's exit status is in the message; no VM is left; a rerun creates it.
    pvesim.fault({"fail_tasks": {"type": "qmcreate", "count": 1, "message": "unable to create VM 4100 - lvcreate failed"}})
    run = run_playbook(pvesim.play(sno_task("Fails") + "  ignore_errors: true\n" + sno_task("Rerun")))
    assert "lvcreate failed" in run.task("Fails")["msg"], run.output
    assert run.task("Rerun")["created"] is True and run.rc == 0
    # qcow2 on lvmthin: refused before any API write, naming disk and storage.
    seq = pvesim.last_seq()
    run = run_playbook(pvesim.play("""
- name: Bad format
  proxshift.proxmox.proxmox_vm:
    name: other
    node: pve1
    disks: [{slot: scsi1, storage: local-lvm, size: 10G, format: qcow2}]
  ignore_errors: true
"""))
    msg = run.task("Bad format")["msg"]
    assert "disk scsi1: format 'qcow2' is not supported on storage 'local-lvm' (type lvmthin" in msg
    assert pvesim.writes_since(seq) == []
    # A lock timeout and a transient 503 are retried.
    pvesim.fault({"http_error": {"path": "/nodes/pve1/qemu/4100/config", "method": "POST", "status": 500,
                                 "message": "can't lock file '/var/lock/qemu-server/lock-4100.conf' - got timeout"}})
    pvesim.fault({"http_error": {"path": "/cluster/resources", "status": 503, "message": "Service Unavailable"}})
    run = run_playbook(pvesim.play(sno_task("Retried", cores=10)))
    assert run.rc == 0, run.output
    assert pvesim.vm(4100)["cores"] == "10"
    # An offline node is named, and full storage is refused before allocating.
    pvesim.fault({"node_offline": {"node": "pve1"}})
    pvesim.fault({"fill_storage": {"node": "pve2", "storage": "local-lvm", "free": 0}})
    run = run_playbook(pvesim.play(sno_task("Offline", cores=12) + "  ignore_errors: true\n" + """
- name: Full storage
  proxshift.proxmox.proxmox_vm:
    name: sno-1
    node: pve2
    disks: [{slot: scsi0, storage: local-lvm, size: 120G}]
  ignore_errors: true
"""))
    assert "node 'pve1' is offline or unreachable (HTTP 595" in run.task("Offline")["msg"], run.output
    assert "storage 'local-lvm' on node 'pve2' has 0.0 GiB free" in run.task("Full storage")["msg"]
    pvesim.fault({"node_offline": {"node": "pve1", "offline": False}})
    run = run_playbook(pvesim.play(sno_task("Back online", cores=12)))
    assert run.rc == 0 and run.task("Back online")["changed"] is True, run.output


def test_password_auth_and_no_secret_in_output(pvesim, run_playbook):
    run = run_playbook(pvesim.play(sno_task("Ticket auth"), connection="password"), verbosity=4, diff=True)
    assert run.rc == 0, run.output
    assert run.task("Ticket auth")["created"] is True
    assert pvesim.root_password not in run.output
    assert pvesim.token_secret not in run.output
    assert "PVE:root@pam:" not in run.output


def pool_of(pvesim, vmid: int):
    return next((v.get("pool") for v in pvesim.api("GET", "/cluster/resources?type=vm") if v["vmid"] == vmid),
                "missing")


def test_pool_is_set_at_create_and_converged_later(pvesim, run_playbook):
    for pool in ("ocp", "lab"):
        pvesim.api("POST", "/pools", {"poolid": pool})

    def task(name, pool):
        return f"""
- name: {name}
  proxshift.proxmox.proxmox_vm:
    name: pooled
    node: pve1
    vmid_range: [4300, 4399]
    owner_tag: ocp-pool
    memory: 2048
    pool: "{pool}"
  register: r
"""

    run = run_playbook(pvesim.play(task("Create in ocp", "ocp") + task("Rerun", "ocp")))
    assert run.rc == 0, run.output
    assert pool_of(pvesim, 4300) == "ocp"
    assert run.task("Rerun")["changed"] is False

    # Check mode and diff report the move and send nothing.
    seq = pvesim.last_seq()
    run = run_playbook(pvesim.play(task("Preview move", "lab")), check=True, diff=True)
    preview = run.task("Preview move")
    assert preview["changed"] is True and preview["changed_keys"] == ["pool"]
    assert preview["diff"]["before"]["pool"] == "ocp" and preview["diff"]["after"]["pool"] == "lab"
    assert pvesim.writes_since(seq) == []

    seq = pvesim.last_seq()
    run = run_playbook(pvesim.play(task("Move to lab", "lab") + task("Rerun in lab", "lab")))
    assert run.rc == 0, run.output
    assert run.task("Move to lab")["changed"] is True
    assert run.task("Rerun in lab")["changed"] is False
    assert pool_of(pvesim, 4300) == "lab"
    assert pvesim.writes_since(seq) == ["PUT /pools/ocp", "PUT /pools/lab"]

    # An empty pool takes it out of any pool; a missing pool is a clear error naming it.
    run = run_playbook(pvesim.play(task("No pool", "") + task("Missing pool", "nope").replace(
        "register: r", "register: r\n  ignore_errors: true")))
    assert run.task("No pool")["changed"] is True
    assert pool_of(pvesim, 4300) is None
    assert run.status("Missing pool") == "failed"
    msg = run.task("Missing pool")["msg"]
    assert "adding VM 4300 to pool 'nope'" in msg and "does not exist" in msg, msg


def test_proxmox_kvm_style_options_through_ansible(pvesim, run_playbook):
    """Cloud-init, vcpus, hotplug, serial and extra_config as YAML gives them (a bool in
    extra_config, a multi-line sshkeys): sent as Proxmox spells them, and the rerun changes
    nothing."""
    extra = """
cloudinit_drive: {storage: local-lvm}
ciuser: core
sshkeys: |
  ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 admin@example
ipconfig: {ipconfig0: "ip=10.0.0.50/24,gw=10.0.0.1"}
vcpus: 4
hotplug: "network,disk,cpu"
serial: {serial0: socket}
vga: serial0
extra_config: {tablet: false}
"""
    run = run_playbook(pvesim.play(sno_task("Cloud-init", extra=extra) + sno_task("Again", extra=extra)))
    assert run.rc == 0, run.output
    assert run.task("Cloud-init")["changed"] is True
    assert run.task("Again")["changed"] is False, run.task("Again")
    cfg = pvesim.vm(4100)
    assert cfg["sshkeys"] == "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5%20admin%40example"
    assert cfg["tablet"] == "0" and cfg["serial0"] == "socket" and cfg["vcpus"] == "4"
    assert cfg["ide0"] == "local-lvm:vm-4100-cloudinit,media=cdrom"
