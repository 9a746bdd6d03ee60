//! Validation and derivation: options in, a [`Plan`] (or every problem at once) out. Each problem
//! names the option path and the rule it broke. Pure: no I/O.
//!
//! [`plan`] runs one stage per concern over a shared [`Ctx`](context::Ctx): each stage reads the
//! options and what earlier stages produced, and returns its own part with its problems and
//! warnings. The stage order is the order problems are reported in. A new rule belongs in the
//! stage file of its concern.

mod addresses;
mod capabilities;
mod context;
mod credentials;
mod features;
mod host_prefix;
mod hosts;
mod infra;
mod names;
mod networks;
mod nodes;
mod ovn;
mod proxy;
mod rendezvous;
mod root_hints;
mod stack;
mod topology;
mod version;
mod vips;

#[cfg(test)]
pub(crate) mod fixtures;

pub use capabilities::{baseline_members, baseline_sets, known_capabilities};
pub use context::Problem;
pub use version::parse_version;

use crate::model::{ExternalOpt, Options, Plan, PlanClusterNetwork};

use context::{Ctx, Findings};

/// The validated plan plus warnings, or every problem found.
pub struct Planned {
    pub plan: Option<Plan>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
    /// Secrets found inside options (pull-secret `auth` values), to mask in all output.
    pub secrets: Vec<String>,
}

/// Validate everything and derive the plan.
pub fn plan(o: &Options) -> Planned {
    let mut cx = Ctx::new(o);
    let mut found = Findings::default();
    cx.minor = found.take(version::check(&cx));
    found.take(names::check(&cx));
    cx.secrets = found.take(credentials::check(&cx));
    cx.net = found.take(networks::check(&cx));
    found.take(host_prefix::check(&cx));
    found.take(ovn::check(&cx));
    cx.infra = found.take(infra::check(&cx));
    cx.nodes = found.take(nodes::check(&cx));
    cx.vips = found.take(vips::parse(&cx));
    cx.addresses = found.take(addresses::check(&cx));
    cx.topo = found.take(topology::check(&cx));
    found.take(names::on_platform(&cx));
    found.take(stack::check(&cx));
    found.take(vips::check(&cx));
    cx.rendezvous = found.take(rendezvous::check(&cx));
    cx.proxy = found.take(proxy::check(&cx));
    cx.mirrors = found.take(proxy::mirrors(&cx));
    cx.capabilities = found.take(capabilities::check(&cx));
    cx.features = found.take(features::check(&cx));
    cx.hosts = found.take(hosts::check(&cx));

    let secrets = std::mem::take(&mut cx.secrets);
    let plan = found.problems.is_empty().then(|| assemble(cx));
    Planned {
        plan,
        problems: found.problems,
        warnings: found.warnings,
        secrets,
    }
}

/// The plan from a context whose stages found no problem.
fn assemble(cx: Ctx) -> Plan {
    let o = cx.o;
    let baremetal = cx.topo.platform == "baremetal";
    // VIPs and the load balancer are baremetal settings; platform none renders none.
    let vips = |l: Vec<String>| if baremetal { l } else { vec![] };
    Plan {
        cluster_name: o.cluster_name.clone(),
        base_domain: o.base_domain.clone(),
        version: o.version.clone(),
        topology: cx.topo.topology,
        platform: cx.topo.platform.to_string(),
        external: (cx.topo.platform == "external").then(|| {
            o.external.clone().unwrap_or(ExternalOpt {
                platform_name: "Unknown".into(),
                cloud_controller_manager: None,
            })
        }),
        control_plane_replicas: cx.topo.masters,
        arbiter_replicas: cx.topo.arbiters,
        compute_replicas: cx.topo.workers,
        network_type: cx.net.network_type,
        machine_networks: o.machine_networks.clone(),
        cluster_networks: o
            .cluster_networks
            .iter()
            .map(|n| PlanClusterNetwork {
                cidr: n.cidr.clone(),
                host_prefix: n.host_prefix,
            })
            .collect(),
        service_networks: o.service_networks.clone(),
        ovn_internal_join_subnet: o.ovn_internal_join_subnet.clone(),
        api_vips: vips(cx.vips.api_strs),
        ingress_vips: vips(cx.vips.ingress_strs),
        load_balancer: o.load_balancer.clone().filter(|_| baremetal),
        pull_secret: o.pull_secret.clone(),
        ssh_key: o.ssh_key.as_ref().map(|k| k.trim().to_string()),
        additional_trust_bundle: o
            .additional_trust_bundle
            .as_deref()
            .map(crate::formats::normalize_pem_bundle),
        additional_trust_bundle_policy: o
            .additional_trust_bundle_policy
            .clone()
            .filter(|_| o.additional_trust_bundle.is_some()),
        proxy: cx.proxy,
        image_digest_sources: cx.mirrors,
        capabilities: cx.capabilities,
        fips: o.fips,
        feature_set: cx.features.feature_set,
        feature_gates: cx.features.feature_gates,
        cpu_partitioning_mode: cx.features.cpu_partitioning_mode,
        minimal_iso: cx.features.minimal_iso,
        boot_artifacts_base_url: cx.features.boot_artifacts_base_url,
        rendezvous_ip: cx.rendezvous.map(|x| x.to_string()).unwrap_or_default(),
        ntp_servers: cx.infra.ntp,
        hosts: cx.hosts,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn all_errors_are_reported_at_once() {
        let v = with(
            with(
                with(compact(), "cluster_name", json!("Bad_Name")),
                "base_domain",
                json!("-x"),
            ),
            "pull_secret",
            json!("{}"),
        );
        let rules: Vec<&str> = problems(&v).iter().map(|p| p.rule).collect();
        assert_eq!(
            rules,
            [
                "cluster-name-dns-subdomain",
                "base-domain-dns-subdomain",
                "pull-secret-format"
            ]
        );
    }
}
