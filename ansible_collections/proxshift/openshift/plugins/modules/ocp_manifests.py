#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/ocp_manifests.py runs. The options must match the Rust argument spec of modules/ocp_manifests; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: ocp_manifests
short_description: Validate and render OpenShift agent-based install manifests, optionally build the agent ISO
description:
  - Turns a cluster definition into C(install-config.yaml) and C(agent-config.yaml) for the OpenShift
    agent-based installer, in O(output_dir).
  - Validates everything before writing anything and reports all problems at once, each naming the option
    path (for example C(nodes[2].mac)) and the rule it broke (for example C(mac-unique)). The rules cover
    names, pull secret, SSH key, trust bundle, CIDRs (network addresses, overlaps, OVN-Kubernetes internal
    subnets), hostPrefix, VIPs, control-plane replica counts per OpenShift version, MACs, node IPs,
    rendezvous IP, root device hints, NTP sources, proxy, mirrors, capabilities (per OpenShift version) and
    nmstate structure.
  - "Address families as the installer has them: IPv4, single-stack IPv6, or dual stack (an IPv4 and an IPv6
    entry in every network list, exactly two service networks; IPv4 first on platform none, either family
    first on baremetal — the first machine network's family is the primary one). In dual stack each node has
    O(nodes[].ip) in the primary family and O(nodes[].secondary_ip) in the other, O(secondary_gateway) is the
    other family's default gateway, and O(api_vips)/O(ingress_vips) are one VIP of the primary family or an
    IPv4+IPv6 pair."
  - "The topology is derived from the nodes: SNO (1 control-plane node, no workers, platform none), compact
    (3 control-plane nodes; 4 or 5 on OpenShift 4.18+), HA (plus workers) or two nodes with an arbiter
    (2 control-plane nodes and nodes with role C(arbiter), any workers; platform baremetal; OpenShift 4.20+ - on
    4.19 the pool needs O(feature_set=TechPreviewNoUpgrade), which the 4.19 agent installer refuses; the
    install-config gets an C(arbiter) pool). Nodes
    without a role become control-plane nodes in list order until there is 1 (single node), 2 (an arbiter is
    given) or 3, the rest workers."
  - Each host gets a generated nmstate C(networkConfig) (one ethernet interface with the node's MAC and static
    IP, the DNS servers and a default route via O(gateway)) unless O(nodes[].network_config) gives its own.
    Every C(networkConfig) is checked structurally and by the nmstate library (parsed and turned into
    NetworkManager keyfiles, as C(nmstatectl gc) does on the installer host); when C(nmstatectl) is on PATH
    it is also run on each one.
  - The templates are built into the module; O(template_dir) may override them. Values are emitted as
    YAML-safe scalars, and the rendered files are parsed back and checked against the validated input
    (and agent-config's strict key set) before they are written.
  - Files are written atomically with mode 0600, only when their content changes (a rerun reports
    C(changed=false)); a file about to change is first backed up as C(NAME.PID.YYYY-MM-DD@HH:MM:SS~).
  - With O(openshift_install), runs C(openshift-install agent create image) on a fresh copy of the files
    (the installer consumes its inputs) and moves the result to C(OUTPUT_DIR/agent) on success. An ISO newer
    than the manifests and younger than O(iso_max_age_hours) is reused.
  - A build folder that is replaced, and the work folder of a failed build, are archived (renamed to
    C(OUTPUT_DIR/archive/agent-TIMESTAMP) or C(failed-build-TIMESTAMP)), never deleted - they hold the
    admin credentials of the ISO they built.
  - With O(keep_build=true) (the cluster's VMs booted from the current ISO) nothing is rebuilt and the
    manifests are not rewritten; changed inputs are reported in RV(held_changes) and a warning.
  - The pull secret is C(no_log) and masked in diffs. The SSH key is a public key and therefore not
    C(no_log), but diffs mask it as well to keep them short.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
options:
  cluster_name:
    description:
      - Cluster name (C(metadata.name)); the cluster domain is C(<cluster_name>.<base_domain>).
      - A DNS subdomain (lowercase letters, digits, C(-) and C(.)), at most 54 characters.
      - Dots only with the rendered platform C(none); C(baremetal) and C(external) take a single DNS label.
    type: str
    required: true
  base_domain:
    description: Base DNS domain of the cluster, a DNS subdomain.
    type: str
    required: true
  version:
    description:
      - OpenShift version the installer binary will install, C(4.N) or C(4.N.Z); 4.14 or later.
      - Decides which control-plane sizes are allowed (4 and 5 only from 4.18).
    type: str
    required: true
  machine_networks:
    description:
      - Machine network CIDRs (the node subnets). Node IPs, the gateways and the VIPs must be inside one. The first
        one's family is the primary family.
    type: list
    elements: str
    required: true
    aliases: [machine_network]
  cluster_networks:
    description: Pod networks.
    type: list
    elements: dict
    default: [{cidr: 10.128.0.0/14, host_prefix: 23}]
    suboptions:
      cidr:
        description: Pod network CIDR.
        type: str
        required: true
      host_prefix:
        description: Prefix length of the per-node pod subnet; at least the CIDR's prefix length (64 for IPv6).
        type: int
        default: 23
  service_networks:
    description: Service network CIDRs, read by the installer to choose the stack. One (IPv4 or IPv6), or for dual stack exactly two, one per family.
    type: list
    elements: str
    default: [172.30.0.0/16]
  network_type:
    description: Cluster network plugin. Only C(OVNKubernetes) is accepted (C(OpenShiftSDN) is rejected).
    type: str
    default: OVNKubernetes
  ovn_internal_join_subnet:
    description:
      - Replaces OVN-Kubernetes' internal IPv4 join subnet (default 100.64.0.0/16) when it collides with your networks.
      - It needs an address for every node the IPv4 O(cluster_networks) allow (2^(host_prefix - prefix) each, summed),
        plus 3 (the installer's and the network operator's C(isV4NodeSubnetLargeEnough)).
    type: str
  gateway:
    description: Default gateway of the machine network (of the primary family in dual stack); required for the generated node networking.
    type: str
  secondary_gateway:
    description: Dual stack only, the other family's default gateway; required for the generated dual-stack node networking.
    type: str
  dns_servers:
    description: DNS servers for the nodes; at least one is required for the generated node networking.
    type: list
    elements: str
  ntp_servers:
    description:
      - Extra NTP sources, rendered as C(additionalNTPSources) - IP addresses or lower-case domain names (the agent
        installer's C(validateAdditionalNTPSources) - C(NTP.example.com) is refused).
    type: list
    elements: str
  interface_name:
    description: In-guest name of the node NIC. Proxmox virtio NICs on the first PCI slot appear as C(ens18) in RHCOS.
    type: str
    default: ens18
  dhcp:
    description:
      - The nodes take their addresses from DHCP - agent-config gets no C(networkConfig) for them (a node's own
        O(nodes[].dhcp) wins). Their O(nodes[].ip) is optional - the address the DHCP server reserves for the node,
        used for the rendezvous IP and the checks, never rendered.
      - With no control-plane address known, O(rendezvous_ip) is required (the installer has no networkConfig to take it from).
    type: bool
    default: false
  api_vips:
    description: API virtual IPs, one address (of the primary family in dual stack) or an IPv4+IPv6 pair. Required for platform baremetal (compact and HA).
    type: list
    elements: str
    aliases: [api_vip]
  ingress_vips:
    description:
      - Ingress virtual IPs, one address (of the primary family in dual stack) or an IPv4+IPv6 pair. Required for
        platform baremetal (compact and HA).
    type: list
    elements: str
    aliases: [ingress_vip]
  platform:
    description:
      - C(auto) renders C(none) for SNO and C(baremetal) (with in-cluster keepalived/haproxy VIPs) otherwise.
      - C(none) for a multi-node cluster means you provide DNS and a load balancer for api, api-int and *.apps.
      - C(external) (C(platform.external), settings in O(external)) is like C(none) for DNS and load balancing,
        for clusters whose infrastructure provider brings its own integrations (SNO or multi-node).
    type: str
    default: auto
    choices: [auto, baremetal, none, external]
  external:
    description: C(platform.external) when O(platform=external); ignored (with a warning) otherwise.
    type: dict
    suboptions:
      platform_name:
        description: C(platformName), the infrastructure provider's name (informational).
        type: str
        default: Unknown
      cloud_controller_manager:
        description:
          - C(cloudControllerManager) - C(External) when the provider runs its own cloud controller manager,
            empty for none. Platform name C(oci) needs C(External).
        type: str
        choices: ["", External]
  load_balancer:
    description: C(platform.baremetal.loadBalancer.type); with C(UserManaged) the VIPs may lie outside the machine network.
    type: str
    choices: [OpenShiftManagedDefault, UserManaged]
  nodes:
    description: The cluster's hosts, in order. The first control-plane node's IP is the default rendezvous IP.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - Hostname, unique in the cluster, as the assisted installer takes it (C(ValidateHostname)) - lowercase letters,
            digits and C(-) in C(.)-separated labels of 1 to 63 characters, starting with a letter or digit, at most 253 in
            all; not a C(localhost) name.
        type: str
        required: true
      role:
        description:
          - Node role; derived from the position when omitted. C(arbiter) (two nodes with an arbiter) is never
            derived.
        type: str
        choices: [master, arbiter, worker]
      mac:
        description: MAC address of the node NIC (the Proxmox VM's C(net0) MAC); unicast, unique case-insensitively.
        type: str
        required: true
      ip:
        description: Static IP address (of the primary family in dual stack); allocated from O(ip_pool) when omitted.
        type: str
      secondary_ip:
        description: Dual stack only, the node's address in the other family; required unless O(nodes[].network_config) is given.
        type: str
      interface:
        description: In-guest NIC name for this node; defaults to O(interface_name).
        type: str
      dhcp:
        description: This node takes its addresses from DHCP (no C(networkConfig)); defaults to O(dhcp). Not with O(nodes[].network_config).
        type: bool
      root_device_hints:
        description:
          - Installation disk selection (agent-config C(rootDeviceHints)).
          - An empty dict is no hint (the installer writes none); the agent then chooses the disk, with a warning.
        type: dict
        suboptions:
          device_name:
            description: Device path; starts with C(/dev/) and nests only under C(/dev/disk/by-path/).
            type: str
            aliases: [deviceName]
          wwn:
            description: Disk WWN, C(0x) plus 16 or 32 hex digits (set it on the Proxmox disk with C(wwn=)).
            type: str
          serial_number:
            description: Disk serial number (Proxmox C(serial=)).
            type: str
            aliases: [serial, serialNumber]
          hctl:
            description: SCSI address C(Host:Channel:Target:Lun).
            type: str
          model:
            description: Disk model substring.
            type: str
          vendor:
            description: Disk vendor substring.
            type: str
          min_size_gigabytes:
            description: Minimum disk size in gigabytes.
            type: int
            aliases: [minSizeGigabytes]
          rotational:
            description: Whether the disk is rotational.
            type: bool
      network_config:
        description:
          - Your own nmstate document for this host instead of the generated one (bonds, VLANs, several NICs).
          - It must assign the node's IP (and its secondary IP when given) and carry the node's MAC - as some interface's
            C(mac-address), or by naming the node's interface (O(nodes[].interface) or O(interface_name)) without a
            C(mac-address), which agent-config C(interfaces) then maps to O(nodes[].mac).
        type: dict
  ip_pool:
    description: Addresses for nodes without O(nodes[].ip), handed out in node order, skipping node IPs, VIPs, gateway and DNS servers.
    type: dict
    suboptions:
      start:
        description: First address of the pool (inside a machine network).
        type: str
        required: true
      end:
        description: Last address of the pool; the end of the machine network when omitted.
        type: str
  rendezvous_ip:
    description:
      - IP of the host that coordinates the install; must be a control-plane node's IP (or secondary IP). Defaults to the first one's IP.
      - Required when the control-plane nodes use DHCP and none has a given O(nodes[].ip); it must then not be a worker's.
    type: str
  pull_secret:
    description:
      - Registry pull secret, a JSON document with an C(auths) map (string or dict). Never logged.
      - Required unless O(installer_only=true); it is also the registry login of an extraction (O(release_image)).
    type: json
  ssh_key:
    description: One SSH public key line for the C(core) user. With O(fips=true) only RSA or ECDSA keys.
    type: str
  additional_trust_bundle:
    description:
      - PEM CA certificates to trust (mirror registry, proxy); every block must be an x509 certificate, and nothing
        but white space may follow the last one (the installer's C(validate.CABundle) refuses even a blank line there).
      - Trailing white space and blank lines are removed before rendering, so a PEM file read with a trailing blank
        line works; text after the last certificate is refused.
    type: str
  additional_trust_bundle_policy:
    description: When the bundle is added to the nodes' trust store; the installer default is C(Proxyonly).
    type: str
    choices: [Proxyonly, Always]
  proxy:
    description: Cluster-wide proxy.
    type: dict
    suboptions:
      http_proxy:
        description: C(http://) proxy URL.
        type: str
      https_proxy:
        description: C(http://) or C(https://) proxy URL.
        type: str
      no_proxy:
        description:
          - Lowercase domains (optionally with a leading or trailing dot), IPs or CIDRs that bypass the proxy, or C(*)
            alone; no spaces, no wildcards (the installer's C(validateProxy)).
        type: list
        elements: str
  image_digest_sources:
    description:
      - Mirror repositories for disconnected installs (C(imageDigestSources)); repositories without tag or digest.
      - A repository with a path starts with its registry host (a name with a C(.) or C(:port), or C(localhost)), as
        the installer's C(validateNamedRepository) requires - C(ocp/release) is refused; a bare C(host[:port]) is accepted.
      - Every path component follows the docker reference grammar the installer parses with - lower-case letters and
        digits joined by one C(.), C(_), C(__) or dashes, no separator at either end - so C(quay.io/-ocp/release) and
        C(quay.io/ocp/release.) are refused.
    type: list
    elements: dict
    suboptions:
      source:
        description: Source repository, for example C(quay.io/openshift-release-dev/ocp-release).
        type: str
        required: true
      mirrors:
        description: Mirror repositories holding the same content; an empty list redirects nothing (a warning).
        type: list
        elements: str
        required: true
  capabilities:
    description:
      - Optional cluster capabilities, checked against the names and baselines of O(version) as openshift/api
        defines them, and the installer's rules on the enabled set (baseline plus additional) - C(Ingress) is
        required (4.16 and later), C(marketplace) needs C(OperatorLifecycleManager) (4.15 and later), and baseline
        C(None) on platform baremetal needs C(baremetal).
    type: dict
    suboptions:
      baseline_capability_set:
        description:
          - C(None), C(v4.11) up to the cluster's own version, or C(vCurrent).
          - Required whenever O(capabilities) is set - the installer's C(validateCapabilities) refuses
            O(capabilities.additional_enabled_capabilities) without it; C(vCurrent) is the default set only when the
            whole O(capabilities) is left out.
          - C(v4.18) is the newest baseline any release defines (4.19 and later add none).
        type: str
      additional_enabled_capabilities:
        description:
          - Capabilities enabled on top of the baseline (for example C(baremetal), C(Ingress)), as the version names
            them - for example C(OperatorLifecycleManagerV1) (OLM v1, 4.18 and later).
        type: list
        elements: str
  fips:
    description: Install the cluster in FIPS mode.
    type: bool
    default: false
  feature_set:
    description:
      - install-config C(featureSet) - C(TechPreviewNoUpgrade), C(DevPreviewNoUpgrade) or C(CustomNoUpgrade); unset or
        empty for the default set. Any of them cannot be undone and prevents upgrades (the module warns).
      - The agent installer of OpenShift 4.16 through 4.19 refuses every featureSet but the default
        (C(OptionalInstallConfig.validateInstallConfig)); from 4.20 it takes them.
    type: str
  feature_gates:
    description:
      - install-config C(featureGates), each C(<name>=<bool>); allowed only with O(feature_set=CustomNoUpgrade), as the
        installer rules.
    type: list
    elements: str
  cpu_partitioning_mode:
    description:
      - install-config C(cpuPartitioningMode) - C(AllNodes) sets every node up for CPU workload partitioning at install
        time (it cannot be turned on later); C(None) is the installer's default.
    type: str
  minimal_iso:
    description:
      - agent-config C(minimalISO) - build an ISO without the rootfs, which the hosts then fetch from
        O(boot_artifacts_base_url) or the release (needed for iSCSI boot).
    type: bool
    default: false
  boot_artifacts_base_url:
    description:
      - agent-config C(bootArtifactsBaseURL) - the absolute URL where the PXE/minimal-ISO boot artifacts will be served.
    type: str
  extra_manifests:
    description:
      - Files of Kubernetes objects (MachineConfigs, operator subscriptions...) the installer applies at install time,
        copied to C(openshift/) in O(output_dir) and the ISO build (a change rebuilds the ISO).
      - Each must be C(*.yaml) or C(*.yml) (the installer skips other files) and every YAML document in it (several per file
        allowed) a mapping with C(apiVersion), C(kind) and C(metadata.name); a problem names the file and the document's
        index (0-based). File names must be unique.
    type: list
    elements: path
  output_dir:
    description: Directory for the rendered files (created with mode 0700) and the C(agent/) build directory.
    type: path
    required: true
  template_dir:
    description:
      - Directory with your own C(install-config.yaml.j2) and/or C(agent-config.yaml.j2) (minijinja, Jinja2 syntax;
        trim_blocks and lstrip_blocks on). Any other C(*.j2) there can be included.
      - Templates see the validated plan (C(cluster_name), C(hosts), C(platform), …) and the filters C(yaml),
        C(yaml_block(indent)) and C(yaml_text(indent)). The output must still agree with the validated input.
    type: path
  backup:
    description: Back up a file before replacing it with different content.
    type: bool
    default: true
  openshift_install:
    description:
      - Build the agent ISO with this C(openshift-install) binary (a path, or a name looked up on PATH).
      - The ISO, C(auth/kubeconfig) and C(auth/kubeadmin-password) end up in C(OUTPUT_DIR/agent/).
      - The last place the installer is looked for, after O(openshift_installers) and O(openshift_install_cache).
        A path that is not an executable fails; a name not on PATH counts as not found (see O(installer_required)).
      - Whichever installer is chosen must report O(version) in C(openshift-install version) (the same minor for
        V(4.19), exactly that version for V(4.19.7)); another version is refused before anything is written.
    type: path
  openshift_installers:
    description:
      - >-
        Installer per OpenShift version, version to path, for example C({"4.19": /opt/oi/4.19/openshift-install,
        "4.16.3": /opt/oi/openshift-install-4.16.3}). Quote the keys (unquoted C(4.10) is the number 4.1).
      - Looked up by O(version) first, then by its minor (V(4.19.7) finds key V(4.19)). An entry that names no
        executable fails.
    type: dict
  openshift_install_cache:
    description:
      - A folder of installers named C(openshift-install-<version>); C(openshift-install-<version>) is tried, then
        C(openshift-install-<minor>). Looked in after O(openshift_installers), before O(openshift_install).
      - Where an installer extracted from the release image goes (see O(release_image)).
    type: path
  installer_required:
    description:
      - Fail when no installer for O(version) is found (with the places looked in). When false, a missing installer
        is reported in RV(installer_missing) and no ISO is built; a wrong-version or unusable one always fails.
    type: bool
    default: false
  release_image:
    description:
      - >-
        When O(openshift_installers), O(openshift_install_cache) and O(openshift_install) have no installer of
        O(version) (or only O(openshift_install), of another version), the installer is extracted from this
        release image with C(oc adm release extract --command=openshift-install) and placed in
        O(openshift_install_cache) as C(openshift-install-<version>), where later runs find it. Its version is
        checked like any installer's before it is placed; a failed or wrong extraction leaves nothing there.
      - >-
        Default: C(quay.io/openshift-release-dev/ocp-release:<version>-x86_64) for an exact O(version) (the
        clusters are C(amd64)). For a minor such as V(4.19) there is no default (a release image is one exact
        release) and nothing is extracted unless this is given; the failure says so.
      - >-
        The registry login is O(pull_secret), handed to C(oc) as C(--registry-config) in a file of mode 0600 in
        the module's temporary folder, removed as soon as C(oc) returns. Runs extracting the same version at once
        (one playbook run per cluster) take turns on a lock file in the cache, C(.openshift-install-<version>.lock):
        one extracts, the others use its installer.
      - In check mode nothing is extracted; RV(installer_release_image) and RV(installer_path) say what would be.
    type: str
  oc_binary:
    description:
      - The C(oc) that extracts installers (O(release_image)), a path or a name looked up on PATH.
      - The default C(oc) not on PATH, an C(oc-<version>) of O(openshift_install_cache) is used (the one of O(version),
        of its minor, else the newest), as C(awx/ee/install-openshift-clients.sh) puts them there.
    type: str
    default: oc
  installer_only:
    description:
      - Only choose the installer of O(version) (extracting it when that is how the cluster gets one) and return
        RV(installer_path); nothing is validated, rendered, written or built. O(pull_secret) may be left out
        (then nothing can be extracted). How a run of the install phase alone finds the cluster's installer.
    type: bool
    default: false
  build_iso:
    description:
      - Build the agent ISO with the chosen installer. False chooses and checks the installer only (preflight).
    type: bool
    default: true
  iso_max_age_hours:
    description: Rebuild an ISO older than this; the certificates embedded in it are short-lived (24 h).
    type: int
    default: 24
  keep_build:
    description:
      - The cluster's VMs booted from the ISO in C(OUTPUT_DIR/agent), so it must stay - whatever its age, its
        inputs, or whether the ISO file itself is still there (a build folder restored from the cluster's
        record has no ISO). The manifests are rendered and compared but not written; what differs is
        reported (file and YAML paths, never values) with a hint to reinstall with C(force_install).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Validates and renders, reports what would change, writes nothing, extracts no installer and builds no ISO.
  diff_mode:
    support: full
    description: Shows the changes to both files, with the pull secret and SSH key masked.
"""

EXAMPLES = r"""
- name: Render a compact cluster with static IPs
  proxshift.openshift.ocp_manifests:
    cluster_name: lab
    base_domain: example.com
    version: "4.16"
    machine_networks: [192.168.50.0/24]
    gateway: 192.168.50.1
    dns_servers: [192.168.50.2]
    api_vips: [192.168.50.5]
    ingress_vips: [192.168.50.6]
    nodes:
      - {name: master-0, mac: "BC:24:11:00:00:01", ip: 192.168.50.10}
      - {name: master-1, mac: "BC:24:11:00:00:02", ip: 192.168.50.11}
      - {name: master-2, mac: "BC:24:11:00:00:03", ip: 192.168.50.12}
    pull_secret: "{{ lookup('file', 'pull-secret.json') }}"
    ssh_key: "{{ lookup('file', '~/.ssh/id_ed25519.pub') }}"
    output_dir: /srv/ocp/lab

- name: Single-node cluster behind a mirror, with the agent ISO
  proxshift.openshift.ocp_manifests:
    cluster_name: sno1
    base_domain: example.com
    version: "4.18"
    machine_networks: [10.0.10.0/24]
    gateway: 10.0.10.1
    dns_servers: [10.0.10.2]
    ntp_servers: [ntp.example.com]
    ip_pool: {start: 10.0.10.50}
    nodes:
      - name: sno1
        mac: "BC:24:11:AB:00:01"
        root_device_hints: {wwn: "0x5000c500a0b1c2d3"}
    image_digest_sources:
      - source: quay.io/openshift-release-dev/ocp-release
        mirrors: [mirror.example.com:5000/ocp4/openshift-release-dev]
    additional_trust_bundle: "{{ lookup('file', 'mirror-ca.pem') }}"
    additional_trust_bundle_policy: Always
    pull_secret: "{{ vault_pull_secret }}"
    output_dir: /srv/ocp/sno1
    openshift_install: openshift-install
  register: manifests

- name: HA cluster with a proxy and custom templates
  proxshift.openshift.ocp_manifests:
    cluster_name: prod
    base_domain: example.com
    version: "4.17"
    machine_networks: [172.16.0.0/24]
    gateway: 172.16.0.1
    dns_servers: [172.16.0.2]
    api_vip: 172.16.0.5
    ingress_vip: 172.16.0.6
    proxy:
      http_proxy: http://proxy.example.com:3128
      https_proxy: http://proxy.example.com:3128
      no_proxy: [.example.com, 172.16.0.0/24]
    ip_pool: {start: 172.16.0.20, end: 172.16.0.40}
    nodes: "{{ groups['prod'] | map('extract', hostvars) | map(attribute='ocp_node') | list }}"
    pull_secret: "{{ vault_pull_secret }}"
    template_dir: "{{ playbook_dir }}/templates/ocp"
    output_dir: /srv/ocp/prod
"""

RETURN = r"""
output_dir:
  description: Directory holding the rendered files.
  returned: success
  type: str
install_config_path:
  description: Path of C(install-config.yaml).
  returned: success
  type: str
  sample: /srv/ocp/lab/install-config.yaml
agent_config_path:
  description: Path of C(agent-config.yaml).
  returned: success
  type: str
  sample: /srv/ocp/lab/agent-config.yaml
extra_manifest_paths:
  description: Where the extra manifests are kept (C(openshift/) in O(output_dir)).
  returned: success
  type: list
  elements: str
  sample: [/srv/ocp/lab/openshift/99-worker-chrony.yaml]
backups:
  description: Backup files made in this run.
  returned: success
  type: list
  elements: str
topology:
  description: Derived topology.
  returned: success
  type: str
  choices: [sno, compact, ha, arbiter]
platform:
  description: Rendered platform.
  returned: success
  type: str
  choices: [none, baremetal, external]
control_plane_replicas:
  description: Number of control-plane nodes.
  returned: success
  type: int
compute_replicas:
  description: Number of workers.
  returned: success
  type: int
rendezvous_ip:
  description: The rendezvous host's IP.
  returned: success
  type: str
  sample: 192.168.50.10
api_vips:
  description: Rendered API VIPs (empty for platform none).
  returned: success
  type: list
  elements: str
ingress_vips:
  description: Rendered Ingress VIPs (empty for platform none).
  returned: success
  type: list
  elements: str
nodes:
  description:
    - Every node with its role, IP (given or allocated), secondary IP (dual stack, else null), lowercase MAC and
      interface name.
    - C(nodes_config) is the node's entry of the nodes-config.yaml of the installer's day-2 flow
      (C(oc adm node-image create)) - hostname, interfaces, networkConfig and rootDeviceHints as in
      agent-config.yaml, without the role. C(playbooks/scale.yaml) writes it for added nodes.
  returned: success
  type: list
  elements: dict
  sample: [{name: master-0, role: master, ip: 192.168.50.10, secondary_ip: null, mac: "bc:24:11:00:00:01", interface: ens18}]
nmstatectl_checked:
  description:
    - Whether an installed C(nmstatectl gc) also checked every host's networkConfig (it does when nmstatectl is on PATH).
    - The built-in nmstate library check (parse plus NetworkManager keyfile generation) always runs.
  returned: success
  type: bool
oc_path:
  description:
    - The C(oc) the installer will run to extract the base ISO from the release payload - C(oc-<version>) beside a cached
      C(openshift-install-<version>) (put first on the installer's PATH), else C(oc) on PATH; empty when there is none.
  returned: when an installer was chosen
  type: str
iso_built:
  description: Whether the agent ISO was built in this run.
  returned: when openshift_install is set
  type: bool
iso_reason:
  description: Why the ISO was built, kept or would be built.
  returned: when openshift_install is set
  type: str
iso_dir:
  description: Directory of the ISO build (C(OUTPUT_DIR/agent)).
  returned: when openshift_install is set
  type: str
iso_path:
  description: The agent ISO; null when kept (O(keep_build)) but no longer on disk.
  returned: when openshift_install is set
  type: str
  sample: /srv/ocp/lab/agent/agent.x86_64.iso
iso_sha256:
  description: sha256 of the agent ISO; null when the ISO file is not there.
  returned: when openshift_install or keep_build is set
  type: str
cluster_id:
  description: The cluster ID the installer generated for this build (C(*installconfig.ClusterID) in its state file).
  returned: when openshift_install or keep_build is set
  type: str
install_state_path:
  description: The installer's C(.openshift_install_state.json) in the build folder (what C(agent wait-for) loads).
  returned: when openshift_install or keep_build is set
  type: str
archived:
  description: Where the replaced build folder and failed work folders were moved.
  returned: when an ISO was built
  type: list
  elements: path
held_changes:
  description: With O(keep_build), per changed file the YAML paths that differ from the kept build's inputs.
  returned: always
  type: list
  elements: dict
  sample: [{file: install-config.yaml, paths: ["networking.machineNetwork[0].cidr"]}]
kubeconfig_path:
  description: The admin kubeconfig written with the ISO.
  returned: when openshift_install is set
  type: str
kubeadmin_password_path:
  description: The kubeadmin password file written with the ISO.
  returned: when openshift_install is set
  type: str
problems:
  description: On a validation failure, every problem with its option path, rule and message.
  returned: failure
  type: list
  elements: dict
  sample: [{path: "nodes[2].mac", rule: mac-unique, msg: "bc:24:11:00:00:01 is also the MAC of nodes[0]"}]
installer_log_tail:
  description: Last lines of C(.openshift_install.log) when C(openshift-install) failed.
  returned: failure
  type: list
  elements: str
installer_dir:
  description: The failed build's work directory, kept for inspection; the next build archives it.
  returned: failure
  type: str
installer_path:
  description: The C(openshift-install) chosen for the cluster's version (in check mode, where an extracted one would go).
  returned: when an installer option is given and one was found or is to be extracted
  type: str
  sample: /home/me/.cache/proxshift/installers/openshift-install-4.19
installer_version:
  description: The version the chosen installer reports.
  returned: when installer_path is, but an extraction in check mode
  type: str
  sample: 4.19.7
installer_source:
  description: >-
    Which option chose it (C(openshift_installers[KEY]), C(openshift_install_cache), C(openshift_install)), or
    C(release image IMAGE) when this run extracted it (or, in check mode, would).
  returned: when installer_path is
  type: str
installer_release_image:
  description: The release image the installer was extracted from in this run (in check mode, would be).
  returned: when the installer is extracted
  type: str
  sample: quay.io/openshift-release-dev/ocp-release:4.19.7-x86_64
installer_missing:
  description: Why no installer was found nor can be extracted (installer_required false); no ISO was built.
  returned: when no installer was found
  type: str
installer_looked_in:
  description: The places looked in for the installer of the cluster's version.
  returned: when no installer was found
  type: list
  elements: str
installer_problem:
  description: Why the chosen installer cannot be used (wrong version, not executable, not found when required).
  returned: failure
  type: str
"""
