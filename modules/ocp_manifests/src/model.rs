//! The module's options as typed serde structs (they mirror `argument_spec()` one to one) and the
//! derived plan that the templates render.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
pub struct Options {
    pub cluster_name: String,
    pub base_domain: String,
    pub version: String,
    pub machine_networks: Vec<String>,
    pub cluster_networks: Vec<ClusterNetwork>,
    pub service_networks: Vec<String>,
    pub network_type: String,
    pub ovn_internal_join_subnet: Option<String>,
    pub gateway: Option<String>,
    /// Dual stack: the default gateway of the second address family.
    pub secondary_gateway: Option<String>,
    pub dns_servers: Option<Vec<String>>,
    pub ntp_servers: Option<Vec<String>>,
    pub interface_name: String,
    /// Every node takes its addresses from DHCP (no static networkConfig) unless it says otherwise.
    #[serde(default)]
    pub dhcp: bool,
    pub api_vips: Option<Vec<String>>,
    pub ingress_vips: Option<Vec<String>>,
    pub platform: String,
    /// Platform `external`'s settings (install-config `platform.external`).
    pub external: Option<ExternalOpt>,
    pub load_balancer: Option<String>,
    pub nodes: Vec<NodeOpt>,
    pub ip_pool: Option<IpPool>,
    pub rendezvous_ip: Option<String>,
    /// Absent only with `installer_only` (then nothing is extracted).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub pull_secret: String,
    pub ssh_key: Option<String>,
    pub additional_trust_bundle: Option<String>,
    pub additional_trust_bundle_policy: Option<String>,
    pub proxy: Option<ProxyOpt>,
    pub image_digest_sources: Option<Vec<MirrorOpt>>,
    pub capabilities: Option<CapabilitiesOpt>,
    pub fips: bool,
    pub feature_set: Option<String>,
    pub feature_gates: Option<Vec<String>>,
    pub cpu_partitioning_mode: Option<String>,
    #[serde(default)]
    pub minimal_iso: bool,
    pub boot_artifacts_base_url: Option<String>,
    /// Files for the build's `openshift/` folder (see [`crate::extra`]).
    pub extra_manifests: Option<Vec<PathBuf>>,
    pub output_dir: PathBuf,
    pub template_dir: Option<PathBuf>,
    pub backup: bool,
    pub openshift_install: Option<String>,
    /// Version (`4.19`, `4.19.7`) → installer path; see [`crate::installer`].
    pub openshift_installers: Option<std::collections::BTreeMap<String, String>>,
    pub openshift_install_cache: Option<PathBuf>,
    /// Fail when no installer of the cluster's version is found (else no ISO is built).
    #[serde(default)]
    pub installer_required: bool,
    /// The release image to extract the installer from (else the exact version's); see [`crate::release`].
    pub release_image: Option<String>,
    /// `oc` for the extraction: a path, or a name found on PATH.
    #[serde(default = "oc")]
    pub oc_binary: String,
    /// Only choose the installer (extracting it when that is how the cluster gets one); render nothing.
    #[serde(default)]
    pub installer_only: bool,
    /// Build the ISO with the installer; false: only choose and check the installer (preflight).
    #[serde(default = "yes")]
    pub build_iso: bool,
    pub iso_max_age_hours: u64,
    /// The VMs booted from the current build: never rebuild it, never rewrite its inputs.
    #[serde(default)]
    pub keep_build: bool,
}

fn yes() -> bool {
    true
}

fn oc() -> String {
    "oc".to_string()
}

/// An option not given arrives as null: the empty string then.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Deserialize)]
pub struct ClusterNetwork {
    pub cidr: String,
    pub host_prefix: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NodeOpt {
    pub name: String,
    pub role: Option<String>,
    pub mac: String,
    pub ip: Option<String>,
    /// Dual stack: the node's address in the second address family.
    pub secondary_ip: Option<String>,
    pub interface: Option<String>,
    /// This node's own choice over the cluster's `dhcp`.
    pub dhcp: Option<bool>,
    pub root_device_hints: Option<RootDeviceHintsOpt>,
    pub network_config: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RootDeviceHintsOpt {
    pub device_name: Option<String>,
    pub wwn: Option<String>,
    pub serial_number: Option<String>,
    pub hctl: Option<String>,
    pub model: Option<String>,
    pub vendor: Option<String>,
    pub min_size_gigabytes: Option<i64>,
    pub rotational: Option<bool>,
}

/// openshift/installer pkg/types/external `Platform`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ExternalOpt {
    pub platform_name: String,
    /// `""` (none) or `External`.
    pub cloud_controller_manager: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IpPool {
    pub start: String,
    pub end: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProxyOpt {
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub no_proxy: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MirrorOpt {
    pub source: String,
    pub mirrors: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapabilitiesOpt {
    pub baseline_capability_set: Option<String>,
    pub additional_enabled_capabilities: Option<Vec<String>>,
}

/// The derived cluster shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// Single-node OpenShift: 1 control-plane node, no workers.
    Sno,
    /// 3–5 control-plane nodes that also run workloads, no workers.
    Compact,
    /// 3–5 control-plane nodes plus workers.
    Ha,
    /// Two-node OpenShift with arbiter (`controlPlaneTopology: HighlyAvailableArbiter`): 2 (or more)
    /// control-plane nodes, at least one small arbiter node that only keeps etcd's quorum, any workers.
    Arbiter,
}

impl Topology {
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Sno => "sno",
            Topology::Compact => "compact",
            Topology::Ha => "ha",
            Topology::Arbiter => "arbiter",
        }
    }
}

/// Everything the templates see: validated, defaulted and derived values, in the installer's terms.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub cluster_name: String,
    pub base_domain: String,
    pub version: String,
    pub topology: Topology,
    pub platform: String,
    /// Platform `external` only.
    pub external: Option<ExternalOpt>,
    pub control_plane_replicas: usize,
    /// install-config `arbiter.replicas` (0: no arbiter pool rendered).
    pub arbiter_replicas: usize,
    pub compute_replicas: usize,
    pub network_type: String,
    pub machine_networks: Vec<String>,
    pub cluster_networks: Vec<PlanClusterNetwork>,
    pub service_networks: Vec<String>,
    pub ovn_internal_join_subnet: Option<String>,
    pub api_vips: Vec<String>,
    pub ingress_vips: Vec<String>,
    pub load_balancer: Option<String>,
    /// Absent only with `installer_only` (then nothing is extracted).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub pull_secret: String,
    pub ssh_key: Option<String>,
    pub additional_trust_bundle: Option<String>,
    pub additional_trust_bundle_policy: Option<String>,
    pub proxy: Option<PlanProxy>,
    pub image_digest_sources: Vec<PlanMirror>,
    pub capabilities: Option<PlanCapabilities>,
    pub fips: bool,
    /// install-config `featureSet` (None: the default set).
    pub feature_set: Option<String>,
    pub feature_gates: Vec<String>,
    pub cpu_partitioning_mode: Option<String>,
    /// agent-config `minimalISO` and `bootArtifactsBaseURL`.
    pub minimal_iso: bool,
    pub boot_artifacts_base_url: Option<String>,
    pub rendezvous_ip: String,
    pub ntp_servers: Vec<String>,
    pub hosts: Vec<PlanHost>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanClusterNetwork {
    pub cidr: String,
    pub host_prefix: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanProxy {
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    /// Comma-joined, as the installer wants it.
    pub no_proxy: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanMirror {
    pub source: String,
    pub mirrors: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanCapabilities {
    pub baseline_capability_set: Option<String>,
    pub additional_enabled_capabilities: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanHost {
    pub name: String,
    pub role: String,
    pub ip: String,
    /// Dual stack: the address in the second family.
    pub secondary_ip: Option<String>,
    /// Lowercase `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    pub interface: String,
    /// agent-config `interfaces[]`: the NIC above, or every interface with a MAC in the user's
    /// own networkConfig.
    pub interfaces: Vec<PlanInterface>,
    pub prefix_length: u8,
    /// Installer field names (`deviceName`, `serialNumber`, …); `null` when no hint was given.
    pub root_device_hints: Option<Value>,
    /// The nmstate document for this host (generated, or the user's own); null for a DHCP host
    /// (agent-config then has no `networkConfig` for it).
    pub network_config: Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanInterface {
    pub name: String,
    pub mac: String,
}
