//! The installer corpus (`tests/fixtures/installer-corpus/`): install-configs openshift-install
//! accepts or rejects, from its own test tables, each run through the planner. Agreement must be
//! 100%: an accepted case plans without a problem, a rejected one reports every rule it lists.

use std::net::IpAddr;
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::formats::tests::TEST_SSH_KEY;
use crate::net::Cidr;
use crate::plan::fixtures::{options, PULL_SECRET};
use crate::plan::plan;

#[derive(Deserialize)]
struct Corpus {
    networkings: Map<String, Value>,
    baremetal_vips: Map<String, Value>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    case: String,
    networking: String,
    platform: String,
    #[serde(default)]
    set: Map<String, Value>,
    /// Options of the generated hosts to change, by position (agent-config cases).
    #[serde(default)]
    hosts: Vec<Map<String, Value>>,
    installer: String,
    #[serde(default)]
    rules: Vec<String>,
}

fn corpus_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/installer-corpus")
}

/// The n-th address of the first CIDR in `list` (as given) of the wanted family.
fn nth_of(list: &[Value], v4: bool, n: u128) -> Option<IpAddr> {
    list.iter()
        .filter_map(Value::as_str)
        .filter_map(|s| Cidr::parse(s).ok())
        .find(|c| c.addr.is_ipv4() == v4)
        .and_then(|c| {
            Cidr {
                addr: c.network(),
                prefix: c.prefix,
            }
            .nth(n)
        })
}

/// A valid cluster around the case's networking: three control-plane nodes at the 10th, 11th and
/// 12th address of the first machine network (and of the other family's in dual stack), the
/// gateway at the 1st and DNS at the 2nd; the installer's tables carry no hosts, the agent needs them.
fn cluster(corpus: &Corpus, c: &Case) -> Value {
    let mut v = json!({
        "cluster_name": "test-cluster", "base_domain": "test-domain", "version": "4.19",
        "pull_secret": PULL_SECRET, "ssh_key": TEST_SSH_KEY.trim(), "output_dir": "/nonexistent",
        "platform": c.platform,
    });
    let o = v.as_object_mut().unwrap();
    o.extend(
        corpus.networkings[&c.networking]
            .as_object()
            .unwrap()
            .clone(),
    );
    if c.platform == "baremetal" {
        o.extend(corpus.baremetal_vips.clone());
    }
    o.extend(c.set.clone());
    let machine = o["machine_networks"].as_array().unwrap().clone();
    let services: Vec<Cidr> = o["service_networks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| Cidr::parse(s.as_str()?).ok())
        .collect();
    let dual =
        services.iter().any(|s| s.addr.is_ipv4()) && services.iter().any(|s| !s.addr.is_ipv4());
    let primary_v4 = machine
        .first()
        .and_then(|s| Cidr::parse(s.as_str()?).ok())
        .is_none_or(|c| c.addr.is_ipv4());
    let at = |v4: bool, n: u128| nth_of(&machine, v4, n).map(|ip| json!(ip.to_string()));
    let nodes: Vec<Value> = (0..3u128)
        .map(|i| {
            let mut n = json!({"name": format!("master-{i}"), "role": "master",
                               "mac": format!("bc:24:11:00:00:0{}", i + 1)});
            if let Some(ip) = at(primary_v4, 10 + i) {
                n["ip"] = ip;
            }
            if let Some(ip) = at(!primary_v4, 10 + i).filter(|_| dual) {
                n["secondary_ip"] = ip;
            }
            n
        })
        .collect();
    let nodes = nodes
        .into_iter()
        .enumerate()
        .map(|(i, mut n)| {
            if let (Some(patch), Some(node)) = (c.hosts.get(i), n.as_object_mut()) {
                node.extend(patch.clone());
            }
            n
        })
        .collect();
    o.insert("nodes".into(), Value::Array(nodes));
    for (key, v4, n) in [("gateway", primary_v4, 1), ("dns_servers", primary_v4, 2)] {
        if let Some(ip) = at(v4, n) {
            o.insert(
                key.into(),
                if key == "dns_servers" {
                    json!([ip])
                } else {
                    ip
                },
            );
        }
    }
    if let Some(ip) = at(!primary_v4, 1).filter(|_| dual) {
        o.insert("secondary_gateway".into(), ip);
    }
    v
}

#[test]
fn corpus_agrees_with_the_installer() {
    let mut disagreements = Vec::new();
    let mut count = 0;
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let corpus: Corpus = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for c in &corpus.cases {
            count += 1;
            let planned = plan(&options(&cluster(&corpus, c)));
            let found: Vec<&str> = planned.problems.iter().map(|p| p.rule).collect();
            let agrees = match c.installer.as_str() {
                "accept" => found.is_empty(),
                "reject" => {
                    !c.rules.is_empty() && c.rules.iter().all(|r| found.contains(&r.as_str()))
                }
                other => panic!("{}: installer: {other} (accept or reject)", c.case),
            };
            if !agrees {
                disagreements.push(format!(
                    "{}: installer {}s{}, ocp_manifests found {:#?}",
                    c.case,
                    c.installer,
                    if c.rules.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", c.rules.join(", "))
                    },
                    planned.problems
                ));
            }
        }
    }
    assert!(count >= 50, "only {count} corpus cases found");
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}
