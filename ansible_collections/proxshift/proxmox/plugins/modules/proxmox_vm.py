#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_proxmox),
# which plugins/action/proxmox_vm.py runs. The options must match the Rust argument spec of modules/proxmox_vm; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: proxmox_vm
short_description: Create, converge and remove Proxmox VE virtual machines for OpenShift nodes
description:
  - Creates, converges and removes Proxmox VE VMs with a typed spec (CPU, memory, UEFI, TPM, disks, NICs with
    fixed MACs, CD-ROM, boot order, tags, ...), from scratch or as clones of a template.
  - 'Idempotent: desired and current config are normalised the way Proxmox normalises them and only differences
    are sent; C(changed) is true only when something changed. Check mode sends no write; diff mode shows before/after
    per VM.'
  - Changes Proxmox parks as pending on a running VM are reported (RV(reboot_required)) and applied only with
    O(apply_pending=reboot).
  - 'Safe to rerun after any failure: a rerun never clones twice (one that finds a create or clone still running,
    a nameless VM locked C(create) or C(clone), waits for it and converges it), a failed create or clone leaves no
    half-configured VM behind, VM locks are waited for, lock timeouts and transient 5xx errors are retried (a create
    or clone answered 502/503/504 by a proxy is sent again only when no VM of its name and ownership was made), an
    offline node (HTTP 595) is named as such.'
  - 'A hibernated VM (C(qm suspend --todisk), C(lock: suspended)) takes no config change until it is started again
    (Proxmox refuses them); the module says so at once instead of waiting for the lock. It is deleted as usual.'
  - VMs created by the module carry O(owner_tag); VMs without it are never modified or deleted unless O(adopt=true).
  - Connection options and environment variables are those of community.proxmox, so playbooks can switch.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.proxmox.api
options:
  state:
    description:
      - C(present) creates or converges the VM; C(absent) deletes it (stopping it first only with O(force)).
    type: str
    default: present
    choices:
      - present
      - absent
  vmid:
    description:
      - The VM id. Identifies an existing VM, or is the id a new VM gets. When not given, an existing VM is found
        by O(name), and a new one gets an id from O(vmid_range) or C(/cluster/nextid).
      - A VMID an LXC container holds is refused, whatever O(state) asks, and the container is left alone; names
        never match a container, and O(vmid_range) skips containers' VMIDs.
    type: int
  name:
    description: &id001
      - 'The VM name (a DNS name: letters, digits, C(-) and C(.)).'
      - Identifies the VM when O(vmid) is not given; a name shared by several VMs is an error that lists them.
    type: str
  node:
    description:
      - The node for a new VM. An existing VM stays where it is (a different node is an error; the module does
        not migrate).
      - A clone can only be created on another node than its source's when every volume of the source (a
        CD-ROM's ISO included) and O(clone.storage) are on shared storage, as Proxmox requires; otherwise this is
        an error, given before anything is cloned, naming the local volumes.
    type: str
  allowed_nodes:
    description: &id002
      - Nodes a new VM may be placed on when O(node) is not given (default all online nodes).
      - 'Placement follows CAPMOX: reservable memory = node memory x O(memory_adjustment)/100 minus the C(maxmem)
        of every non-template VM on it; among nodes with room, the one with the fewest VMs of this cluster (same
        O(owner_tag)) wins, then the one with more reservable memory, then by name. Deterministic.'
      - A clone whose source has a volume on local storage (a CD-ROM's ISO included), or whose O(clone.storage)
        is not shared, can only stay on the source's node (Proxmox refuses a C(target) node then); it is placed
        there, and O(allowed_nodes) without that node is an error saying why no node was eligible.
    type: list
    elements: str
  memory_adjustment:
    description:
      - 'Percent of a node''s memory that placement may reserve: 100 = physical memory, more overcommits (300
        treats 64 GiB as 192 GiB), less keeps headroom, 0 turns memory accounting off.'
    type: int
    default: 100
  vmid_range:
    description:
      - 'C([start, end]): new VMs take the lowest id in this range that is free cluster-wide (checked with C(/cluster/nextid?vmid=N));
        a create that loses a race for an id takes the next one, so no two VMs share an id.'
    type: list
    elements: int
  clone:
    description:
      - 'Create the VM as a clone of a template (or VM) instead of from scratch. A rerun finds the clone by name
        or id and never clones twice. After cloning, fixed MACs are re-applied (clones get random ones), disks
        grown and everything else converged; if that fails the new clone is removed. Until the clone is tagged
        it carries the description line C(proxshift-clone-of-owner: <owner_tag>), so a run that timed out during
        a long clone is finished by the next run instead of cloning again; the line is removed when the VM is
        converged.'
    type: dict
    suboptions:
      vmid:
        description:
          - Source template id.
        type: int
      name:
        description:
          - Source template name (a template is preferred when VMs share the name).
        type: str
      full:
        description:
          - Full clone (independent copy); C(false) makes a linked clone (source must be a template).
        type: bool
        default: true
      storage:
        description:
          - Target storage for a full clone's disks.
        type: str
      format:
        description:
          - Disk format of a full clone. Checked against the target storage before the call (Proxmox would silently
            fall back to raw on lvmthin).
        type: str
        choices:
          - raw
          - qcow2
          - vmdk
  pool:
    description:
      - Resource pool the VM belongs to. A new VM is created (or cloned) into it; an existing VM in
        another pool, or in none, is moved into it (taken out of its old pool first, since the
        C(allow-move) flag exists only from PVE 8.1). An empty string takes the VM out of any pool.
        Omitted, pool membership is left alone.
      - The pool must exist. Moving a VM needs C(Pool.Allocate) on the pools involved and
        C(VM.Allocate) on the VM.
    type: str
  cpu:
    description:
      - CPU type, e.g. C(host) or C(x86-64-v2-AES) (RHCOS 9 needs at least x86-64-v2).
      - Unset, the CPU type is not managed - an existing or cloned VM keeps its own, a new VM gets
        Proxmox's default (C(kvm64) through the API, too old for RHCOS 9). The site flow sets C(host)
        unless the inventory says otherwise.
    type: str
  cores:
    description:
      - Cores per socket.
    type: int
  sockets:
    description:
      - CPU sockets.
    type: int
  memory:
    description:
      - Memory in MiB.
    type: int
  balloon:
    description:
      - Minimum balloon memory in MiB; C(0) disables the balloon device. Must not exceed O(memory).
    type: int
  bios:
    description:
      - Firmware. C(ovmf) (UEFI) needs an EFI disk (O(efidisk)).
    type: str
    choices:
      - seabios
      - ovmf
  efidisk:
    description:
      - The EFI vars disk (C(efidisk0)) for O(bios=ovmf). Created when missing; its type cannot change in place.
    type: dict
    suboptions:
      storage:
        description:
          - Storage for the EFI disk; defaults to the first disk's storage.
        type: str
      efitype:
        description:
          - EFI vars size; C(4m) is required for Secure Boot capable firmware.
        type: str
        default: 4m
        choices:
          - 2m
          - 4m
      pre_enrolled_keys:
        description:
          - Enrol the distribution and Microsoft Secure Boot keys.
        type: bool
        default: false
  machine:
    description:
      - Machine type, e.g. C(q35).
    type: str
  tpm:
    description:
      - A TPM state disk (C(tpmstate0)).
    type: dict
    suboptions:
      storage:
        description:
          - Storage for the TPM state; defaults to the first disk's storage.
        type: str
      version:
        description:
          - TPM version; cannot change after creation.
        type: str
        default: v2.0
        choices:
          - v1.2
          - v2.0
  scsihw:
    description:
      - SCSI controller; C(virtio-scsi-single) suits O(disks[].iothread).
    type: str
    choices:
      - lsi
      - lsi53c810
      - virtio-scsi-pci
      - virtio-scsi-single
      - megasas
      - pvscsi
  disks:
    description: &id003
      - 'Data disks. Each listed disk is a complete definition: options it does not set go back to Proxmox''s
        defaults (other options on the drive, such as throttling, are kept).'
      - 'Missing disks are allocated, smaller ones grown (never shrunk: that is an error), option changes applied
        in place. Disks present on the VM but not listed are left alone.'
    type: list
    elements: dict
    suboptions:
      slot:
        description:
          - 'Drive slot: C(scsi0)-C(scsi30), C(virtio0)-C(virtio15), C(sata0)-C(sata5), C(ide0)-C(ide3).'
        type: str
        required: true
      storage:
        description:
          - Storage id. A disk on another storage than the spec says is an error (the module does not move disks).
        type: str
        required: true
      size:
        description:
          - Size like C(120G), C(512M), C(10.1G), C(1T); a bare number is GiB. Proxmox allocates whole KiB,
            rounding up; the size is compared the same way, so C(10.1G) is neither "cannot shrink" nor a
            resize on every run.
        type: str
        required: true
      format:
        description:
          - Disk format at allocation; checked against the storage before any API call (C(qcow2) on C(lvmthin)
            is a clear error naming disk and storage).
        type: str
        choices:
          - raw
          - qcow2
          - vmdk
      ssd:
        description:
          - Present the disk as an SSD (not on virtio).
        type: bool
      iothread:
        description:
          - Use an IO thread (scsi with C(virtio-scsi-single), or virtio).
        type: bool
      discard:
        description:
          - Pass discard/trim to the storage.
        type: bool
      cache:
        description:
          - Cache mode.
        type: str
        choices:
          - none
          - writethrough
          - writeback
          - unsafe
          - directsync
      wwn:
        description:
          - World wide name (C(0x) + 16 hex digits), usable in root device hints.
        type: str
      serial:
        description:
          - Disk serial, usable in root device hints.
        type: str
      backup:
        description:
          - Include the disk in backups (Proxmox default true).
        type: bool
      import_from:
        description:
          - Copy a volume into the new disk (PVE C(import-from)), e.g. a qcow2 or raw cloud image in a storage's
            C(import) content (C(local:import/rhcos.x86_64.qcow2)) or another VM's disk. Only used when the disk is
            created; O(disks[].size) is the size the copy is then grown to and must be at least the image's.
        type: str
  nics:
    description: &id004
      - Network cards. Listed NICs are complete definitions; NICs on the VM that are not listed are removed.
      - Without O(nics[].mac) an existing NIC keeps its MAC (a new one gets a generated MAC).
    type: list
    elements: dict
    suboptions:
      slot:
        description:
          - NIC slot, C(net0)-C(net31).
        type: str
        required: true
      model:
        description:
          - NIC model.
        type: str
        default: virtio
        choices:
          - e1000
          - e1000-82540em
          - e1000-82544gc
          - e1000-82545em
          - e1000e
          - i82551
          - i82557b
          - i82559er
          - ne2k_isa
          - ne2k_pci
          - pcnet
          - rtl8139
          - virtio
          - vmxnet3
      bridge:
        description:
          - Bridge, e.g. C(vmbr0).
        type: str
        required: true
      mac:
        description:
          - Fixed MAC address (unicast), e.g. the C(macAddress) of agent-config.yaml. Re-applied after a clone.
        type: str
      vlan:
        description:
          - VLAN tag (1-4094).
        type: int
      mtu:
        description:
          - MTU (virtio only; C(1) = the bridge's MTU).
        type: int
      firewall:
        description:
          - Enable the Proxmox firewall on this NIC.
        type: bool
      queues:
        description:
          - Multiqueue count.
        type: int
      link_down:
        description:
          - Disconnect the NIC.
        type: bool
  cdrom:
    description:
      - A CD-ROM drive. O(agent_iso) fills in its ISO.
    type: dict
    suboptions:
      slot:
        description:
          - Drive slot of the CD-ROM.
        type: str
        default: ide2
      iso:
        description:
          - ISO volume (C(local:iso/agent.x86_64.iso)) or C(none) for an empty drive; default C(none).
        type: str
  boot:
    description:
      - 'Boot order, e.g. C([scsi0, ide2]): the blank disk falls through to the ISO on first boot, the installed
        disk wins afterwards.'
    type: list
    elements: str
  onboot:
    description:
      - Start the VM when the node boots.
    type: bool
  ostype:
    description:
      - Guest OS type, C(l26) for RHCOS.
    type: str
  agent:
    description:
      - Enable the QEMU guest agent device.
    type: bool
  tags:
    description: &id005
      - 'Proxmox tags (normalised as Proxmox does: lower case, sorted, de-duplicated). O(owner_tag) is always
        added.'
      - When not given, the VM's own tags are kept and O(owner_tag) is added.
    type: list
    elements: str
  description:
    description:
      - VM notes. An empty string removes them.
    type: str
  protection:
    description:
      - Protection flag (a protected VM cannot be deleted).
    type: bool
  vcpus:
    description:
      - Hot-pluggable vCPUs (PVE C(vcpus)), at most O(cores) x O(sockets). Changes live only with C(cpu) in O(hotplug).
    type: int
  numa:
    description:
      - Enable NUMA (PVE C(numa)); needed for memory hot-plug.
    type: bool
  hotplug:
    description:
      - Hot-plug features (PVE C(hotplug)) - C(0) for none, C(1) for Proxmox's default C(network,disk,usb), or a
        comma-separated list of C(network), C(disk), C(cpu), C(memory), C(usb), C(cloudinit).
      - C(cores) never hot-plugs; a change the running VM cannot take waits in its pending changes (see
        O(apply_pending)).
    type: str
  vga:
    description:
      - Display (PVE C(vga)) as Proxmox spells it, e.g. C(serial0) or C(std,memory=32).
    type: str
  serial:
    description:
      - Serial ports, C(serial0) to C(serial3), each C(socket) or a C(/dev/) path. An empty value removes the port.
      - A C(/dev/) path is a real device, and as for a raw I(hostpci) device only a C(root@pam) password session may
        set, change or remove it.
    type: dict
  rng0:
    description:
      - VirtIO random number generator (PVE C(rng0)), e.g. C(source=/dev/urandom,max_bytes=1024,period=1000).
    type: str
  startup:
    description:
      - Start/stop order and delays (PVE C(startup)), e.g. C(order=1,up=30,down=60).
    type: str
  hostpci:
    description:
      - PCI passthrough, C(hostpci0) to C(hostpci15), each as Proxmox spells it (C(0000:01:00.0,pcie=1) or
        C(mapping=gpu,pcie=1)). An empty value removes the device. Proxmox lets only C(root@pam) logged in with its
        password (I(api_user)/I(api_password); no API token, not even root's) set, change or remove a raw host
        device; anyone with C(VM.Config.HWType) and C(Mapping.Use) may use a mapping. The module refuses such a
        change up front, before anything is created.
    type: dict
  cloudinit_drive:
    description:
      - The cloud-init drive Proxmox generates from the cloud-init options (C(<storage>:cloudinit), a CD-ROM
        volume C(vm-<vmid>-cloudinit)). Created when its slot is empty; never moved.
    type: dict
    suboptions:
      storage:
        description:
          - Storage for the drive.
        type: str
        required: true
      slot:
        description:
          - Drive slot (C(ide2) is O(cdrom)'s default).
        type: str
        default: ide0
  ciuser:
    description:
      - Cloud-init user name (PVE C(ciuser)).
    type: str
  sshkeys:
    description:
      - Cloud-init SSH public keys, one per line. Sent URL-encoded as Proxmox wants them and compared decoded, so
        reruns change nothing.
    type: str
  ipconfig:
    description:
      - Cloud-init IP settings, C(ipconfig0) to C(ipconfig31), e.g. C(ip=10.0.0.5/24,gw=10.0.0.1) or C(ip=dhcp).
        An empty value removes one.
    type: dict
  nameserver:
    description:
      - Cloud-init DNS servers (PVE C(nameserver)), space-separated IP addresses.
    type: str
  searchdomain:
    description:
      - Cloud-init DNS search domain (PVE C(searchdomain)).
    type: str
  cicustom:
    description:
      - Cloud-init custom files (PVE C(cicustom)), e.g. C(user=local:snippets/user.yaml,network=local:snippets/net.yaml).
    type: str
  extra_config:
    description:
      - Any other VM config key Proxmox knows, with its value as Proxmox spells it (C(tablet) to C(0), C(usb0) to C(host=1-1)).
        Diffed, checked and reported like the other options. An empty value removes the key. The value of
        C(cipassword) is masked in all output, failures included.
      - Keys an option of this module manages (disks, NICs, C(cores), C(vga), ...) are refused, naming that option.
      - Keys Proxmox reserves to a C(root@pam) password session (C(args), C(affinity), C(hookscript), a host
        C(usbN) device, ...) are refused up front when the module logs in otherwise.
    type: dict
  purge_unlisted_disks:
    description:
      - Destroy the VM's disks that O(disks) does not list (and its C(unusedN) volumes). Only on a VM that already
        carries the ownership tag (O(owner_tag)); a VM being adopted is refused. Does nothing when O(disks) is not set.
    type: bool
    default: false
  agent_iso:
    description:
      - Upload a local ISO (the OpenShift agent ISO) to an ISO storage through the API when it is missing there
        or differs, then attach it to O(cdrom) (slot C(ide2) unless O(cdrom.slot) says otherwise). No SMB/NFS
        mounts. Uploaded once per run even for many VMs.
      - The ISO is streamed from disk and never held in memory (a 1 GiB ISO takes a few MB of RAM). Unless
        O(agent_iso.sha256) gives its SHA-256, it is read twice, once for that checksum and once by the upload,
        which sends it for PVE's upload task to verify.
      - With O(agent_iso.state=absent) (and the VM's O(state=absent)) the ISO is deleted from the storage once every
        VM of the run is gone, on each node whose storage lists it (a shared storage once). Only a volume the
        options vouch for is deleted, and both checks run before any VM is removed; O(agent_iso.filename) must
        start with O(agent_iso.name_prefix) and O(agent_iso.storage) plus O(agent_iso.filename) must be exactly
        O(agent_iso.volid), the volume recorded at upload. The ISO is kept (a warning) when a VM of the run failed,
        and refused when a VM carrying O(owner_tag) that the run does not remove still uses it (PVE itself deletes
        an ISO a VM uses). An ISO already gone is no change. Deleting needs C(Datastore.Allocate) on
        C(/storage/<storage>).
    type: dict
    suboptions:
      state:
        description:
          - V(present) uploads and attaches the ISO, V(absent) deletes it after the run's VMs.
        type: str
        choices: [present, absent]
        default: present
      src:
        description:
          - Path of the ISO on the machine running the module. Required with O(agent_iso.state=present).
        type: path
      storage:
        description:
          - File-based storage with content C(iso), e.g. C(local).
        type: str
        required: true
      filename:
        description:
          - 'Name on the storage (must end in C(.iso) or C(.img)). Default C(<stem>-<first 12 hex of sha256>.iso):
            content-addressed, so a volume of that name and the same size already on the storage holds the same
            content and is not uploaded again, and a changed ISO gets a new name.'
          - With a fixed name PVE cannot tell contents apart (it keeps no checksum of a volume), so sameness is
            decided by name and size alone. A volume of that name and the ISO's size counts as the same ISO and is
            not uploaded again; one of another size is uploaded again and overwritten.
        type: str
      sha256:
        description:
          - The ISO's SHA-256 when it is already known (M(proxshift.openshift.ocp_manifests) returns it as
            C(iso_sha256)). The module then does not read the ISO to compute it; PVE's upload task verifies the
            file against it, so a wrong value fails the upload and is never stored. The site flow passes it.
        type: str
      volid:
        description:
          - With O(agent_iso.state=absent), required. The volume ID recorded when the ISO was uploaded
            (C(local:iso/c1-agent-0123456789ab.iso), the cluster record's C(iso_volid)); a volume other than
            O(agent_iso.storage)C(:iso/)O(agent_iso.filename) is refused.
        type: str
      name_prefix:
        description:
          - With O(agent_iso.state=absent), required. What the file name must start with, the tag that says
            ProxShift uploaded it (C(<cluster>-agent-) for a cluster's agent ISO); any other name is refused.
        type: str
  owner_tag:
    description:
      - Tag marking VMs this module created. VMs without it are never modified or deleted unless O(adopt=true).
        Use one per cluster to scope placement spreading too.
    type: str
    default: proxshift
  adopt:
    description:
      - Take over (and tag) an existing VM that does not carry O(owner_tag).
    type: bool
    default: false
  force:
    description:
      - With O(state=absent), stop a running VM before deleting it.
    type: bool
    default: false
  apply_pending:
    description:
      - Changes Proxmox parks as pending on a running VM (CPU, machine, memory without hotplug, ...) are reported
        with RV(reboot_required); C(reboot) reboots the VM to apply them.
    type: str
    default: none
    choices:
      - none
      - reboot
  allow_overcommit:
    description:
      - Turn the node memory and storage free-space pre-check errors into warnings.
    type: bool
    default: false
  vms:
    description:
      - Several VMs in one task. Each item takes the same per-VM options as the top level (O(state) ... O(allow_overcommit));
        unset item options take the top-level value (shared defaults; dicts and lists are replaced, not merged).
      - Items are planned in order (identity, placement, vmid) and then processed in parallel (O(parallel)); each
        VM gets its own result in RV(vms), and one failure does not hide the others' results. Two items naming
        the same VM (name or vmid) are both refused.
    type: list
    elements: dict
    suboptions:
      state:
        description:
          - C(present) creates or converges the VM; C(absent) deletes it (stopping it first only with O(force)).
        type: str
        choices:
          - present
          - absent
      vmid:
        description:
          - The VM id. Identifies an existing VM, or is the id a new VM gets. When not given, an existing VM is
            found by O(name), and a new one gets an id from O(vmid_range) or C(/cluster/nextid).
        type: int
      name:
        description: *id001
        type: str
      node:
        description:
          - The node for a new VM. An existing VM stays where it is (a different node is an error; the module
            does not migrate).
          - A clone can only be created on another node than its source's when every volume of the source (a
            CD-ROM's ISO included) and O(vms[].clone.storage) are on shared storage; otherwise this is an error,
            given before anything is cloned, naming the local volumes.
        type: str
      allowed_nodes:
        description: *id002
        type: list
        elements: str
      memory_adjustment:
        description:
          - 'Percent of a node''s memory that placement may reserve: 100 = physical memory, more overcommits (300
            treats 64 GiB as 192 GiB), less keeps headroom, 0 turns memory accounting off.'
        type: int
      vmid_range:
        description:
          - 'C([start, end]): new VMs take the lowest id in this range that is free cluster-wide (checked with
            C(/cluster/nextid?vmid=N)); a create that loses a race for an id takes the next one, so no two VMs
            share an id.'
        type: list
        elements: int
      clone:
        description:
          - 'Create the VM as a clone of a template (or VM) instead of from scratch. A rerun finds the clone by
            name or id and never clones twice. After cloning, fixed MACs are re-applied (clones get random ones),
            disks grown and everything else converged; if that fails the new clone is removed. Until the clone
            is tagged it carries the description line C(proxshift-clone-of-owner: <owner_tag>), so a run that
            timed out during a long clone is finished by the next run instead of cloning again; the line is removed
            when the VM is converged.'
        type: dict
        suboptions:
          vmid:
            description:
              - Source template id.
            type: int
          name:
            description:
              - Source template name (a template is preferred when VMs share the name).
            type: str
          full:
            description:
              - Full clone (independent copy); C(false) makes a linked clone (source must be a template).
            type: bool
            default: true
          storage:
            description:
              - Target storage for a full clone's disks.
            type: str
          format:
            description:
              - Disk format of a full clone. Checked against the target storage before the call (Proxmox would
                silently fall back to raw on lvmthin).
            type: str
            choices:
              - raw
              - qcow2
              - vmdk
      pool:
        description:
          - Resource pool the VM belongs to (see the top-level O(pool)).
        type: str
      cpu:
        description:
          - CPU type (see the top-level O(cpu)); unset, it is not managed.
        type: str
      cores:
        description:
          - Cores per socket.
        type: int
      sockets:
        description:
          - CPU sockets.
        type: int
      memory:
        description:
          - Memory in MiB.
        type: int
      balloon:
        description:
          - Minimum balloon memory in MiB; C(0) disables the balloon device. Must not exceed O(memory).
        type: int
      bios:
        description:
          - Firmware. C(ovmf) (UEFI) needs an EFI disk (O(efidisk)).
        type: str
        choices:
          - seabios
          - ovmf
      efidisk:
        description:
          - The EFI vars disk (C(efidisk0)) for O(bios=ovmf). Created when missing; its type cannot change in
            place.
        type: dict
        suboptions:
          storage:
            description:
              - Storage for the EFI disk; defaults to the first disk's storage.
            type: str
          efitype:
            description:
              - EFI vars size; C(4m) is required for Secure Boot capable firmware.
            type: str
            default: 4m
            choices:
              - 2m
              - 4m
          pre_enrolled_keys:
            description:
              - Enrol the distribution and Microsoft Secure Boot keys.
            type: bool
            default: false
      machine:
        description:
          - Machine type, e.g. C(q35).
        type: str
      tpm:
        description:
          - A TPM state disk (C(tpmstate0)).
        type: dict
        suboptions:
          storage:
            description:
              - Storage for the TPM state; defaults to the first disk's storage.
            type: str
          version:
            description:
              - TPM version; cannot change after creation.
            type: str
            default: v2.0
            choices:
              - v1.2
              - v2.0
      scsihw:
        description:
          - SCSI controller; C(virtio-scsi-single) suits O(disks[].iothread).
        type: str
        choices:
          - lsi
          - lsi53c810
          - virtio-scsi-pci
          - virtio-scsi-single
          - megasas
          - pvscsi
      disks:
        description: *id003
        type: list
        elements: dict
        suboptions:
          slot:
            description:
              - 'Drive slot: C(scsi0)-C(scsi30), C(virtio0)-C(virtio15), C(sata0)-C(sata5), C(ide0)-C(ide3).'
            type: str
            required: true
          storage:
            description:
              - Storage id. A disk on another storage than the spec says is an error (the module does not move
                disks).
            type: str
            required: true
          size:
            description:
              - Size like C(120G), C(512M), C(10.1G), C(1T); a bare number is GiB. Proxmox allocates whole KiB,
                rounding up; the size is compared the same way, so C(10.1G) is neither "cannot shrink" nor a
                resize on every run.
            type: str
            required: true
          format:
            description:
              - Disk format at allocation; checked against the storage before any API call (C(qcow2) on C(lvmthin)
                is a clear error naming disk and storage).
            type: str
            choices:
              - raw
              - qcow2
              - vmdk
          ssd:
            description:
              - Present the disk as an SSD (not on virtio).
            type: bool
          iothread:
            description:
              - Use an IO thread (scsi with C(virtio-scsi-single), or virtio).
            type: bool
          discard:
            description:
              - Pass discard/trim to the storage.
            type: bool
          cache:
            description:
              - Cache mode.
            type: str
            choices:
              - none
              - writethrough
              - writeback
              - unsafe
              - directsync
          wwn:
            description:
              - World wide name (C(0x) + 16 hex digits), usable in root device hints.
            type: str
          serial:
            description:
              - Disk serial, usable in root device hints.
            type: str
          backup:
            description:
              - Include the disk in backups (Proxmox default true).
            type: bool
          import_from:
            description:
              - Copy a volume into the new disk (PVE C(import-from)), e.g. a qcow2 or raw cloud image in a storage's
                C(import) content (C(local:import/rhcos.x86_64.qcow2)) or another VM's disk. Only used when the disk is
                created; O(disks[].size) is the size the copy is then grown to and must be at least the image's.
            type: str
      nics:
        description: *id004
        type: list
        elements: dict
        suboptions:
          slot:
            description:
              - NIC slot, C(net0)-C(net31).
            type: str
            required: true
          model:
            description:
              - NIC model.
            type: str
            default: virtio
            choices:
              - e1000
              - e1000-82540em
              - e1000-82544gc
              - e1000-82545em
              - e1000e
              - i82551
              - i82557b
              - i82559er
              - ne2k_isa
              - ne2k_pci
              - pcnet
              - rtl8139
              - virtio
              - vmxnet3
          bridge:
            description:
              - Bridge, e.g. C(vmbr0).
            type: str
            required: true
          mac:
            description:
              - Fixed MAC address (unicast), e.g. the C(macAddress) of agent-config.yaml. Re-applied after a clone.
            type: str
          vlan:
            description:
              - VLAN tag (1-4094).
            type: int
          mtu:
            description:
              - MTU (virtio only; C(1) = the bridge's MTU).
            type: int
          firewall:
            description:
              - Enable the Proxmox firewall on this NIC.
            type: bool
          queues:
            description:
              - Multiqueue count.
            type: int
          link_down:
            description:
              - Disconnect the NIC.
            type: bool
      cdrom:
        description:
          - A CD-ROM drive. O(agent_iso) fills in its ISO.
        type: dict
        suboptions:
          slot:
            description:
              - Drive slot of the CD-ROM.
            type: str
            default: ide2
          iso:
            description:
              - ISO volume (C(local:iso/agent.x86_64.iso)) or C(none) for an empty drive; default C(none).
            type: str
      boot:
        description:
          - 'Boot order, e.g. C([scsi0, ide2]): the blank disk falls through to the ISO on first boot, the installed
            disk wins afterwards.'
        type: list
        elements: str
      onboot:
        description:
          - Start the VM when the node boots.
        type: bool
      ostype:
        description:
          - Guest OS type, C(l26) for RHCOS.
        type: str
      agent:
        description:
          - Enable the QEMU guest agent device.
        type: bool
      tags:
        description: *id005
        type: list
        elements: str
      description:
        description:
          - VM notes. An empty string removes them.
        type: str
      protection:
        description:
          - Protection flag (a protected VM cannot be deleted).
        type: bool
      vcpus:
        description:
          - Hot-pluggable vCPUs (PVE C(vcpus)), at most O(cores) x O(sockets). Changes live only with C(cpu) in O(hotplug).
        type: int
      numa:
        description:
          - Enable NUMA (PVE C(numa)); needed for memory hot-plug.
        type: bool
      hotplug:
        description:
          - Hot-plug features (PVE C(hotplug)) - C(0) for none, C(1) for Proxmox's default C(network,disk,usb), or a
            comma-separated list of C(network), C(disk), C(cpu), C(memory), C(usb), C(cloudinit).
          - C(cores) never hot-plugs; a change the running VM cannot take waits in its pending changes (see
            O(apply_pending)).
        type: str
      vga:
        description:
          - Display (PVE C(vga)) as Proxmox spells it, e.g. C(serial0) or C(std,memory=32).
        type: str
      serial:
        description:
          - Serial ports, C(serial0) to C(serial3), each C(socket) or a C(/dev/) path. An empty value removes the port.
          - A C(/dev/) path is a real device, and as for a raw I(hostpci) device only a C(root@pam) password session may
            set, change or remove it.
        type: dict
      rng0:
        description:
          - VirtIO random number generator (PVE C(rng0)), e.g. C(source=/dev/urandom,max_bytes=1024,period=1000).
        type: str
      startup:
        description:
          - Start/stop order and delays (PVE C(startup)), e.g. C(order=1,up=30,down=60).
        type: str
      hostpci:
        description:
          - PCI passthrough, C(hostpci0) to C(hostpci15), each as Proxmox spells it (C(0000:01:00.0,pcie=1) or
            C(mapping=gpu,pcie=1)). An empty value removes the device. Proxmox lets only C(root@pam) logged in with its
            password (I(api_user)/I(api_password); no API token, not even root's) set, change or remove a raw host
            device; anyone with C(VM.Config.HWType) and C(Mapping.Use) may use a mapping. The module refuses such a
            change up front, before anything is created.
        type: dict
      cloudinit_drive:
        description:
          - The cloud-init drive Proxmox generates from the cloud-init options (C(<storage>:cloudinit), a CD-ROM
            volume C(vm-<vmid>-cloudinit)). Created when its slot is empty; never moved.
        type: dict
        suboptions:
          storage:
            description:
              - Storage for the drive.
            type: str
            required: true
          slot:
            description:
              - Drive slot (C(ide2) is O(cdrom)'s default).
            type: str
            default: ide0
      ciuser:
        description:
          - Cloud-init user name (PVE C(ciuser)).
        type: str
      sshkeys:
        description:
          - Cloud-init SSH public keys, one per line. Sent URL-encoded as Proxmox wants them and compared decoded, so
            reruns change nothing.
        type: str
      ipconfig:
        description:
          - Cloud-init IP settings, C(ipconfig0) to C(ipconfig31), e.g. C(ip=10.0.0.5/24,gw=10.0.0.1) or C(ip=dhcp).
            An empty value removes one.
        type: dict
      nameserver:
        description:
          - Cloud-init DNS servers (PVE C(nameserver)), space-separated IP addresses.
        type: str
      searchdomain:
        description:
          - Cloud-init DNS search domain (PVE C(searchdomain)).
        type: str
      cicustom:
        description:
          - Cloud-init custom files (PVE C(cicustom)), e.g. C(user=local:snippets/user.yaml,network=local:snippets/net.yaml).
        type: str
      extra_config:
        description:
          - Any other VM config key Proxmox knows, with its value as Proxmox spells it (C(tablet) to C(0), C(usb0) to C(host=1-1)).
            Diffed, checked and reported like the other options. An empty value removes the key. The value of
            C(cipassword) is masked in all output, failures included.
          - Keys an option of this module manages (disks, NICs, C(cores), C(vga), ...) are refused, naming that option.
          - Keys Proxmox reserves to a C(root@pam) password session (C(args), C(affinity), C(hookscript), a host
            C(usbN) device, ...) are refused up front when the module logs in otherwise.
        type: dict
      purge_unlisted_disks:
        description:
          - Destroy the VM's disks that O(disks) does not list (and its C(unusedN) volumes). Only on a VM that already
            carries the ownership tag (O(owner_tag)); a VM being adopted is refused. Does nothing when O(disks) is not set.
        type: bool
      agent_iso:
        description:
          - Upload a local ISO (the OpenShift agent ISO) to an ISO storage through the API when it is missing
            there or differs, then attach it to O(cdrom) (slot C(ide2) unless O(cdrom.slot) says otherwise). No
            SMB/NFS mounts. Uploaded once per run even for many VMs.
          - With O(agent_iso.state=absent) (and this item's O(state=absent)), deleted once every VM of the run is
            gone; see the top-level O(agent_iso).
        type: dict
        suboptions:
          state:
            description:
              - V(present) uploads and attaches the ISO, V(absent) deletes it after the run's VMs.
            type: str
            choices: [present, absent]
            default: present
          src:
            description:
              - Path of the ISO on the machine running the module. Required with O(agent_iso.state=present).
            type: path
          storage:
            description:
              - File-based storage with content C(iso), e.g. C(local).
            type: str
            required: true
          filename:
            description:
              - 'Name on the storage (must end in C(.iso) or C(.img)). Default C(<stem>-<first 12 hex of sha256>.iso):
                content-addressed, so a changed ISO is always noticed. With a fixed name the ISO is re-uploaded
                when its size differs.'
            type: str
          sha256:
            description:
              - The ISO's SHA-256 when it is already known; the module then does not read the ISO to compute it
                (PVE's upload task verifies it).
            type: str
          volid:
            description:
              - With O(agent_iso.state=absent), required. The volume ID recorded at upload; another volume is refused.
            type: str
          name_prefix:
            description:
              - With O(agent_iso.state=absent), required. What the file name must start with (C(<cluster>-agent-)).
            type: str
      owner_tag:
        description:
          - Tag marking VMs this module created. VMs without it are never modified or deleted unless O(adopt=true).
            Use one per cluster to scope placement spreading too.
        type: str
      adopt:
        description:
          - Take over (and tag) an existing VM that does not carry O(owner_tag).
        type: bool
      force:
        description:
          - With O(state=absent), stop a running VM before deleting it.
        type: bool
      apply_pending:
        description:
          - Changes Proxmox parks as pending on a running VM (CPU, machine, memory without hotplug, ...) are reported
            with RV(reboot_required); C(reboot) reboots the VM to apply them.
        type: str
        choices:
          - none
          - reboot
      allow_overcommit:
        description:
          - Turn the node memory and storage free-space pre-check errors into warnings.
        type: bool
  parallel:
    description:
      - How many VMs of O(vms) are processed at once.
    type: int
    default: 4
  timeouts:
    description:
      - Per-operation timeouts in seconds (the task keeps running on Proxmox when one runs out; a rerun converges).
    type: dict
    default: {}
    suboptions:
      create:
        description:
          - VM creation task.
        type: int
        default: 600
      clone:
        description:
          - Clone task (full clones of large disks take minutes).
        type: int
        default: 1800
      config:
        description:
          - Config update task.
        type: int
        default: 300
      resize:
        description:
          - Disk resize task.
        type: int
        default: 300
      delete:
        description:
          - Destroy task.
        type: int
        default: 600
      upload:
        description:
          - ISO upload (request and copy task).
        type: int
        default: 1800
      stop:
        description:
          - Stopping a VM before deletion.
        type: int
        default: 300
      reboot:
        description:
          - Reboot to apply pending changes.
        type: int
        default: 600
      lock:
        description:
          - Waiting for a VM's config lock (C(backup), C(migrate), ...) to clear. A clone still running is waited
            for up to O(timeouts.clone), a half-built VM found before planning up to O(timeouts.create) or
            O(timeouts.clone).
        type: int
        default: 300
notes:
  - Runs as a native binary on the controller or any host that reaches the Proxmox API; it needs no Python libraries.
  - Pool membership is not part of the VM config; a change of O(pool) shows in RV(changed_keys) and the diff as C(pool).
attributes:
  check_mode:
    support: full
    description: Check mode computes the same answer and sends no write (only GET requests).
  diff_mode:
    support: full
    description: Returns before/after of every changed config key per VM.
"""

EXAMPLES = r"""
- name: A VM from a cloud image with cloud-init (as with community.proxmox.proxmox_kvm)
  proxshift.proxmox.proxmox_vm:
    api_host: pve1.example.com
    api_user: ansible@pve
    api_token_id: ops
    api_token_secret: "{{ vault_pve_token }}"
    name: web-0
    node: pve1
    cores: 2
    vcpus: 2
    memory: 4096
    numa: true
    hotplug: network,disk,cpu
    scsihw: virtio-scsi-single
    disks:
      - slot: scsi0
        storage: local-lvm
        size: 40G
        import_from: local:import/debian-12-genericcloud-amd64.qcow2
    nics:
      - slot: net0
        bridge: vmbr0
    cloudinit_drive:
      storage: local-lvm
    ciuser: admin
    sshkeys: "{{ lookup('file', '~/.ssh/id_ed25519.pub') }}"
    ipconfig:
      ipconfig0: ip=10.0.0.50/24,gw=10.0.0.1
    nameserver: 10.0.0.1
    vga: serial0
    serial:
      serial0: socket
    rng0: source=/dev/urandom
    startup: order=2,up=30
    extra_config:
      tablet: 0
    boot: [scsi0]

- name: Control plane node with UEFI, fixed MAC and the agent ISO
  proxshift.proxmox.proxmox_vm:
    api_host: pve1.example.com
    api_user: ansible@pve
    api_token_id: ocp
    api_token_secret: "{{ vault_pve_token }}"
    ca_path: /etc/pki/pve-root-ca.pem
    name: master-0
    node: pve1
    vmid_range: [4100, 4199]
    cpu: host
    cores: 4
    memory: 16384
    balloon: 0
    bios: ovmf
    machine: q35
    efidisk:
      storage: local-lvm
      efitype: 4m
      pre_enrolled_keys: false
    scsihw: virtio-scsi-single
    disks:
      - slot: scsi0
        storage: local-lvm
        size: 120G
        ssd: true
        iothread: true
        discard: true
        serial: ocp-root
    nics:
      - slot: net0
        bridge: vmbr0
        vlan: 20
        mac: "BC:24:11:00:10:01"
    agent_iso:
      src: /var/lib/proxshift/ocp1/agent.x86_64.iso
      storage: local
    boot: [scsi0, ide2]
    ostype: l26
    onboot: true
    tags: [ocp1]
    owner_tag: ocp1-proxshift

- name: A whole compact cluster at once, cloned from a template and spread over three nodes
  proxshift.proxmox.proxmox_vm:
    api_host: pve1.example.com
    api_user: ansible@pve
    api_token_id: ocp
    api_token_secret: "{{ vault_pve_token }}"
    # Spreading clones over nodes needs the template's volumes and the target storage to be shared.
    clone:
      name: rhcos-template
      full: true
      storage: ceph-vm
    allowed_nodes: [pve1, pve2, pve3]
    memory_adjustment: 95
    vmid_range: [4100, 4199]
    cores: 8
    memory: 32768
    disks:
      - slot: scsi0
        storage: ceph-vm
        size: 120G
    owner_tag: ocp1-proxshift
    parallel: 3
    timeouts:
      clone: 3600
    vms:
      - name: ocp1-m0
        nics: [{slot: net0, bridge: vmbr0, mac: "BC:24:11:00:10:01"}]
      - name: ocp1-m1
        nics: [{slot: net0, bridge: vmbr0, mac: "BC:24:11:00:10:02"}]
      - name: ocp1-m2
        nics: [{slot: net0, bridge: vmbr0, mac: "BC:24:11:00:10:03"}]
  register: cluster_vms

- name: Grow a disk and add memory; reboot to apply what Proxmox keeps pending
  proxshift.proxmox.proxmox_vm:
    api_host: pve1.example.com
    name: ocp1-m0
    memory: 49152
    disks:
      - slot: scsi0
        storage: local-lvm
        size: 200G
    apply_pending: reboot
    owner_tag: ocp1-proxshift

- name: Remove a node VM, stopping it first
  proxshift.proxmox.proxmox_vm:
    api_host: pve1.example.com
    name: ocp1-w3
    state: absent
    force: true
    owner_tag: ocp1-proxshift

- name: Remove a cluster's VMs, then the agent ISO its runs uploaded (the recorded volume only)
  proxshift.proxmox.proxmox_vm:
    api_host: pve1.example.com
    state: absent
    force: true
    owner_tag: proxshift-ocp1
    vms:
      - name: ocp1-m0
      - name: ocp1-m1
      - name: ocp1-m2
    agent_iso:
      state: absent
      storage: local
      filename: ocp1-agent-0123456789ab.iso
      volid: local:iso/ocp1-agent-0123456789ab.iso
      name_prefix: ocp1-agent-
"""

RETURN = r"""
msg:
  description: What happened.
  returned: always
  type: str
vmid:
  description: The VM id (planned id in check mode; null when it would come from C(/cluster/nextid)).
  returned: when O(vms) is not used
  type: int
  sample: 4100
node:
  description: The node the VM is (or would be) on.
  returned: when O(vms) is not used
  type: str
  sample: pve1
name:
  description: The VM name.
  returned: when O(vms) is not used
  type: str
  sample: master-0
state:
  description: The requested state.
  returned: when O(vms) is not used
  type: str
  sample: present
mac_addresses:
  description: MAC address per NIC slot, from the effective config.
  returned: when O(vms) is not used
  type: dict
  sample:
    net0: BC:24:11:00:10:01
config:
  description: The VM's effective config after the run (pending values applied; C(digest) removed). In check mode
    the current config, or for a new VM the parameters it would be created with.
  returned: when O(vms) is not used
  type: dict
  sample:
    cores: 4
    memory: '16384'
    net0: virtio=BC:24:11:00:10:01,bridge=vmbr0,tag=20
changed_keys:
  description: Config keys that changed (or would change); C(clone) for a clone, C(agent_iso) for an upload.
  returned: when O(vms) is not used
  type: list
  elements: str
  sample:
    - memory
    - scsi0
reboot_required:
  description: Changes are pending until the VM restarts.
  returned: when O(vms) is not used
  type: bool
  sample: false
pending_keys:
  description: Config keys Proxmox holds as pending.
  returned: when O(vms) is not used
  type: list
  elements: str
  sample:
    - cores
task_ids:
  description: UPIDs of the Proxmox tasks this run started.
  returned: when O(vms) is not used
  type: list
  elements: str
  sample:
    - 'UPID:pve1:00001ED0:00035693:66343A23:qmcreate:4100:ansible@pve!ocp:'
created:
  description: The VM was (or would be) created.
  returned: when O(vms) is not used
  type: bool
cloned:
  description: The VM was (or would be) created as a clone.
  returned: when O(vms) is not used
  type: bool
deleted:
  description: The VM was (or would be) deleted.
  returned: when O(vms) is not used
  type: bool
iso_volid:
  description: Volume id of the agent ISO.
  returned: when O(agent_iso) is given
  type: str
  sample: local:iso/agent.x86_64-0123456789ab.iso
iso_uploaded:
  description: The ISO was (or would be) uploaded.
  returned: when O(vms) is not used
  type: bool
vms:
  description: One result per item of O(vms), in order, each with the keys above plus C(changed), C(failed) and
    C(msg).
  returned: when O(vms) is used
  type: list
  elements: dict
  sample:
    - name: ocp1-m0
      vmid: 4100
      node: pve1
      changed: true
      failed: false
      msg: the VM changed
      mac_addresses:
        net0: BC:24:11:00:10:01
iso_removed:
  description: The agent ISOs deleted (in check mode, that would be) with O(agent_iso.state=absent), each with its
    C(volid) and the C(nodes) whose storage held it (one node for a shared storage); empty when none was there.
  returned: always
  type: list
  elements: dict
  sample:
    - volid: local:iso/ocp1-agent-0123456789ab.iso
      nodes: [pve1, pve2]
iso_task_ids:
  description: UPIDs of the C(imgdel) tasks of O(agent_iso.state=absent).
  returned: always
  type: list
  elements: str
summary:
  description: 'Counts for O(vms): C(total), C(changed), C(failed).'
  returned: when O(vms) is used
  type: dict
  sample:
    total: 3
    changed: 3
    failed: 0
"""
