//! Parse the rendered YAML back and check it says what the validated plan says — the guard against
//! quoting bugs and against user templates that drop or mangle fields. Also applies the installer's
//! strict agent-config key rules and its rendezvousIP rule to what was actually written.

use std::net::IpAddr;

use serde_json::Value;

use crate::model::Plan;
use crate::nmstate;
use crate::plan::Problem;

/// Top-level install-config keys the installer knows (InstallConfig CRD `properties`); anything else
/// would be dropped with only a warning.
const INSTALL_CONFIG_KEYS: &[&str] = &[
    "additionalTrustBundle",
    "additionalTrustBundlePolicy",
    "apiVersion",
    "arbiter",
    "baseDomain",
    "bootstrapInPlace",
    "capabilities",
    "compute",
    "controlPlane",
    "cpuPartitioningMode",
    "credentialsMode",
    "featureGates",
    "featureSet",
    "fips",
    "imageContentSources",
    "imageDigestSources",
    "kind",
    "metadata",
    "networking",
    "operatorPublishingStrategy",
    "osImageStream",
    "pki",
    "platform",
    "proxy",
    "publish",
    "pullSecret",
    "sshKey",
];
// agent-config is unmarshalled strictly: an unknown key is fatal for the installer.
const AGENT_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "rendezvousIP",
    "bootArtifactsBaseURL",
    "additionalNTPSources",
    "hosts",
    "minimalISO",
];
const HOST_KEYS: &[&str] = &[
    "hostname",
    "role",
    "rootDeviceHints",
    "interfaces",
    "networkConfig",
    "bmc",
];
const HINT_KEYS: &[&str] = &[
    "deviceName",
    "hctl",
    "model",
    "vendor",
    "serialNumber",
    "minSizeGigabytes",
    "wwn",
    "rotational",
];

struct V<'a> {
    file: &'a str,
    problems: Vec<Problem>,
}

impl V<'_> {
    fn err(&mut self, path: &str, rule: &'static str, msg: impl Into<String>) {
        self.problems.push(Problem {
            path: format!("{} {path}", self.file),
            rule,
            msg: msg.into(),
        });
    }
    fn expect(&mut self, doc: &Value, pointer: &str, want: &Value) {
        let got = doc.pointer(pointer).unwrap_or(&Value::Null);
        if got != want {
            let shown = if pointer == "/pullSecret" || pointer == "/sshKey" {
                "(masked)".to_string()
            } else {
                got.to_string()
            };
            self.err(
                pointer,
                "rendered-matches-input",
                format!(
                    "is {shown}, the validated input says {}",
                    mask(pointer, want)
                ),
            );
        }
    }
    fn unknown_keys(&mut self, v: &Value, known: &[&str], at: &str, rule: &'static str) {
        for k in v
            .as_object()
            .map(|m| m.keys().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            if !known.contains(&k.as_str()) {
                self.err(
                    &format!("{at}/{k}"),
                    rule,
                    "is not a field the installer knows",
                );
            }
        }
    }
}

fn mask(pointer: &str, v: &Value) -> String {
    if pointer == "/pullSecret" || pointer == "/sshKey" {
        "(masked)".into()
    } else {
        v.to_string()
    }
}

fn parse(text: &str, file: &str) -> Result<Value, Problem> {
    serde_yaml_ng::from_str::<Value>(text).map_err(|e| Problem {
        path: file.into(),
        rule: "rendered-yaml-parses",
        msg: format!("the rendered file is not valid YAML: {e}"),
    })
}

/// Every disagreement between the rendered files and the plan.
pub fn verify(plan: &Plan, install_config: &str, agent_config: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    match parse(install_config, "install-config.yaml") {
        Ok(doc) => out.extend(verify_install_config(plan, &doc)),
        Err(p) => out.push(p),
    }
    match parse(agent_config, "agent-config.yaml") {
        Ok(doc) => out.extend(verify_agent_config(plan, &doc)),
        Err(p) => out.push(p),
    }
    out
}

fn verify_install_config(plan: &Plan, doc: &Value) -> Vec<Problem> {
    let mut v = V {
        file: "install-config.yaml",
        problems: vec![],
    };
    if !doc.is_object() {
        v.err("/", "rendered-matches-input", "is not a mapping");
        return v.problems;
    }
    v.unknown_keys(doc, INSTALL_CONFIG_KEYS, "", "rendered-known-fields");
    v.expect(doc, "/apiVersion", &"v1".into());
    v.expect(doc, "/metadata/name", &plan.cluster_name.clone().into());
    v.expect(doc, "/baseDomain", &plan.base_domain.clone().into());
    v.expect(doc, "/pullSecret", &plan.pull_secret.clone().into());
    v.expect(
        doc,
        "/sshKey",
        &plan.ssh_key.clone().map(Value::from).unwrap_or(Value::Null),
    );
    v.expect(doc, "/controlPlane/name", &"master".into());
    v.expect(
        doc,
        "/controlPlane/replicas",
        &plan.control_plane_replicas.into(),
    );
    // The arbiter pool exists exactly when nodes have role arbiter.
    let arbiter = (plan.arbiter_replicas > 0).then_some(plan.arbiter_replicas);
    v.expect(
        doc,
        "/arbiter/replicas",
        &arbiter.map(Value::from).unwrap_or(Value::Null),
    );
    let compute: i64 = doc
        .get("compute")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("replicas")?.as_i64())
        .sum();
    if compute as usize != plan.compute_replicas {
        v.err(
            "/compute",
            "rendered-matches-input",
            format!(
                "has {compute} worker replicas, the nodes give {}",
                plan.compute_replicas
            ),
        );
    }
    v.expect(
        doc,
        "/networking/networkType",
        &plan.network_type.clone().into(),
    );
    let cidrs = |p: &str| -> Vec<Value> {
        doc.pointer(p)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|x| x.get("cidr").cloned().unwrap_or_else(|| x.clone()))
            .collect()
    };
    let want = |l: &[String]| l.iter().cloned().map(Value::from).collect::<Vec<_>>();
    if cidrs("/networking/machineNetwork") != want(&plan.machine_networks) {
        v.err(
            "/networking/machineNetwork",
            "rendered-matches-input",
            "differs from machine_networks",
        );
    }
    if cidrs("/networking/serviceNetwork") != want(&plan.service_networks) {
        v.err(
            "/networking/serviceNetwork",
            "rendered-matches-input",
            "differs from service_networks",
        );
    }
    let cluster: Vec<String> = plan
        .cluster_networks
        .iter()
        .map(|c| c.cidr.clone())
        .collect();
    if cidrs("/networking/clusterNetwork") != want(&cluster) {
        v.err(
            "/networking/clusterNetwork",
            "rendered-matches-input",
            "differs from cluster_networks",
        );
    }
    match doc.get("platform").and_then(Value::as_object) {
        Some(p) if p.len() == 1 && p.contains_key(&plan.platform) => {
            if plan.platform == "baremetal" {
                v.expect(
                    doc,
                    "/platform/baremetal/apiVIPs",
                    &want(&plan.api_vips).into(),
                );
                v.expect(
                    doc,
                    "/platform/baremetal/ingressVIPs",
                    &want(&plan.ingress_vips).into(),
                );
            }
            if let Some(e) = &plan.external {
                v.expect(
                    doc,
                    "/platform/external/platformName",
                    &e.platform_name.clone().into(),
                );
            }
        }
        _ => v.err(
            "/platform",
            "rendered-matches-input",
            format!("must hold exactly one platform, '{}'", plan.platform),
        ),
    }
    if let Some(b) = &plan.additional_trust_bundle {
        v.expect(doc, "/additionalTrustBundle", &b.clone().into());
    }
    // Set options must be rendered as given; unset ones a user template may add itself.
    if let Some(set) = &plan.feature_set {
        v.expect(doc, "/featureSet", &set.clone().into());
    }
    if !plan.feature_gates.is_empty() {
        v.expect(doc, "/featureGates", &want(&plan.feature_gates).into());
    }
    if let Some(mode) = &plan.cpu_partitioning_mode {
        v.expect(doc, "/cpuPartitioningMode", &mode.clone().into());
    }
    v.problems
}

fn verify_agent_config(plan: &Plan, doc: &Value) -> Vec<Problem> {
    let mut v = V {
        file: "agent-config.yaml",
        problems: vec![],
    };
    if !doc.is_object() {
        v.err("/", "rendered-matches-input", "is not a mapping");
        return v.problems;
    }
    v.unknown_keys(doc, AGENT_KEYS, "", "agent-config-strict-keys");
    match doc.get("apiVersion").and_then(Value::as_str) {
        Some("v1beta1" | "v1alpha1") => {}
        other => v.err(
            "/apiVersion",
            "agent-config-api-version",
            format!("{other:?} must be v1beta1 (or v1alpha1)"),
        ),
    }
    v.expect(doc, "/kind", &"AgentConfig".into());
    v.expect(doc, "/rendezvousIP", &plan.rendezvous_ip.clone().into());
    if let Some(url) = &plan.boot_artifacts_base_url {
        v.expect(doc, "/bootArtifactsBaseURL", &url.clone().into());
    }
    if plan.minimal_iso {
        v.expect(doc, "/minimalISO", &true.into());
    }
    let hosts = doc
        .get("hosts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if hosts.len() != plan.hosts.len() {
        v.err(
            "/hosts",
            "rendered-matches-input",
            format!(
                "has {} hosts, the inputs have {} nodes",
                hosts.len(),
                plan.hosts.len()
            ),
        );
    }
    let rendezvous: Option<IpAddr> = plan.rendezvous_ip.parse().ok();
    let mut on_master = false;
    for (i, (h, want)) in hosts.iter().zip(&plan.hosts).enumerate() {
        let at = format!("/hosts/{i}");
        v.unknown_keys(h, HOST_KEYS, &at, "agent-config-strict-keys");
        if let Some(hints) = h.get("rootDeviceHints") {
            v.unknown_keys(
                hints,
                HINT_KEYS,
                &format!("{at}/rootDeviceHints"),
                "agent-config-strict-keys",
            );
        }
        v.expect(doc, &format!("{at}/hostname"), &want.name.clone().into());
        v.expect(doc, &format!("{at}/role"), &want.role.clone().into());
        let macs: Vec<String> = h
            .get("interfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| {
                i.get("macAddress")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_lowercase)
            })
            .collect();
        if !macs.contains(&want.mac) {
            v.err(
                &format!("{at}/interfaces"),
                "rendered-matches-input",
                format!("does not list the node's MAC {}", want.mac),
            );
        }
        match h.get("networkConfig") {
            // A DHCP host has none.
            None if want.network_config.is_null() => {}
            None => v.err(
                &format!("{at}/networkConfig"),
                "rendered-matches-input",
                "is missing",
            ),
            Some(_) if want.network_config.is_null() => v.err(
                &format!("{at}/networkConfig"),
                "rendered-matches-input",
                "is set for a DHCP node",
            ),
            Some(nc) => {
                for (p, msg) in nmstate::check(nc) {
                    v.err(
                        &format!("{at}/networkConfig/{}", p.replace('.', "/")),
                        "nmstate-structure",
                        msg,
                    );
                }
                let addrs = nmstate::addresses(nc);
                if want.role == "master" && rendezvous.is_some_and(|r| addrs.contains(&r)) {
                    on_master = true;
                }
                if want.role == "worker" && rendezvous.is_some_and(|r| addrs.contains(&r)) {
                    v.err(
                        &format!("{at}/networkConfig"),
                        "rendezvous-on-master",
                        "has role 'worker' and has the rendezvousIP assigned to it",
                    );
                }
            }
        }
    }
    // The installer itself only refuses a worker's networkConfig holding the rendezvous IP
    // (validateRendezvousIPNotWorker); a DHCP master's address is not in agent-config at all.
    let dhcp_master = plan
        .hosts
        .iter()
        .any(|h| h.role == "master" && h.network_config.is_null());
    if !on_master && !dhcp_master {
        v.err(
            "/rendezvousIP",
            "rendezvous-on-master",
            "is not assigned to any control-plane host's networkConfig",
        );
    }
    v.problems
}
