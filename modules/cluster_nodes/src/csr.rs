//! Which kubelet CertificateSigningRequests may be approved: pure, no I/O.
//!
//! A node joining a cluster asks for two certificates. Its **client** certificate
//! (`kubernetes.io/kube-apiserver-client-kubelet`) is requested with the bootstrap identity
//! (on OpenShift the `node-bootstrapper` service account of `openshift-machine-config-operator`)
//! for the subject `CN=system:node:<name>, O=system:nodes`. Its **serving** certificate
//! (`kubernetes.io/kubelet-serving`) is requested by the node itself (`system:node:<name>`, group
//! `system:nodes`) for the same subject, with the node's host names and addresses as SANs.
//!
//! [`decide`] approves exactly those, for the expected node names only. A CSR that names an expected
//! node but fails a check (another requestor, another subject, a SAN that is not the node's) is
//! [`Verdict::Refused`]: someone other than that node asks for its identity, and the caller stops.
//! Anything else is [`Verdict::Unexpected`]: reported, never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::net::IpAddr;

use base64::Engine;
use serde_json::Value;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, X509CertificationRequest};

pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The identity OpenShift's nodes bootstrap with (the machine-config-operator's bootstrap kubeconfig).
pub const DEFAULT_BOOTSTRAP_USER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
pub const DEFAULT_BOOTSTRAP_GROUP: &str =
    "system:serviceaccounts:openshift-machine-config-operator";
const NODE_PREFIX: &str = "system:node:";
const NODES_GROUP: &str = "system:nodes";

/// Why a CSR's `spec.request` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    #[error("spec.request is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("spec.request is not PEM: {0}")]
    Pem(#[from] x509_parser::error::PEMError),
    #[error("spec.request is PEM {0:?}, not CERTIFICATE REQUEST")]
    Label(String),
    #[error("spec.request is not a PKCS#10 certification request: {0}")]
    Der(#[from] x509_parser::error::X509Error),
}

/// What a PKCS#10 request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub common_names: Vec<String>,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
    /// SANs of any other kind (e-mail, URI, …), as text.
    pub other_sans: Vec<String>,
}

/// Read the request of a CSR object (`spec.request`: base64 of the PEM).
pub fn parse_request(b64: &str) -> Result<Request, CsrError> {
    let pem_bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim())?;
    let (pem, _) = Pem::read(Cursor::new(pem_bytes))?;
    if pem.label != "CERTIFICATE REQUEST" && pem.label != "NEW CERTIFICATE REQUEST" {
        return Err(CsrError::Label(pem.label));
    }
    let (_, req) = X509CertificationRequest::from_der(&pem.contents).map_err(|e| match e {
        x509_parser::nom::Err::Error(e) | x509_parser::nom::Err::Failure(e) => e,
        x509_parser::nom::Err::Incomplete(_) => x509_parser::error::X509Error::InvalidCertificate,
    })?;
    let subject = &req.certification_request_info.subject;
    let text = |it: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue>| {
        it.map(|a| a.as_str().map(str::to_string))
            .collect::<Result<Vec<_>, _>>()
    };
    let mut out = Request {
        common_names: text(&mut subject.iter_common_name())?,
        organizations: text(&mut subject.iter_organization())?,
        ..Request::default()
    };
    for ext in req.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for n in &san.general_names {
                match n {
                    GeneralName::DNSName(d) => out.dns_names.push(d.to_string()),
                    GeneralName::IPAddress(b) => match ip_from(b) {
                        Some(ip) => out.ips.push(ip),
                        None => out.other_sans.push(format!("IP of {} bytes", b.len())),
                    },
                    other => out.other_sans.push(format!("{other}")),
                }
            }
        }
    }
    Ok(out)
}

fn ip_from(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// The parts of a CertificateSigningRequest object the decision reads.
#[derive(Debug, Clone, Default)]
pub struct Csr {
    pub name: String,
    pub signer: String,
    pub username: String,
    pub groups: Vec<String>,
    pub usages: Vec<String>,
    pub request: String,
    /// `Approved`, `Denied` or `Failed` once decided; `None` while pending.
    pub decided: Option<String>,
    /// `metadata.creationTimestamp` (Unix seconds), when readable.
    pub created: Option<i64>,
}

impl Csr {
    pub fn from_object(obj: &Value) -> Csr {
        let s = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let list = |p: &str| -> Vec<String> {
            obj.pointer(p)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let decided = kube_client::objects::conditions(obj)
            .into_iter()
            .find(|c| {
                c.status == "True" && ["Approved", "Denied", "Failed"].contains(&c.type_.as_str())
            })
            .map(|c| c.type_);
        Csr {
            name: s("/metadata/name"),
            signer: s("/spec/signerName"),
            username: s("/spec/username"),
            groups: list("/spec/groups"),
            usages: list("/spec/usages"),
            request: s("/spec/request"),
            decided,
            created: crate::remediation::parse_time(&s("/metadata/creationTimestamp")).ok(),
        }
    }
}

/// The nodes whose CSRs may be approved, with the SANs each may have besides its own name, and the
/// identity their client CSRs must come from.
#[derive(Debug, Clone)]
pub struct Expected {
    /// Node name → further allowed SANs (IP addresses, host names) of its serving certificate.
    pub nodes: BTreeMap<String, Vec<String>>,
    pub bootstrap_user: String,
    /// Groups the bootstrap identity must be in (all of them).
    pub bootstrap_groups: Vec<String>,
    /// Node name → Unix time its VM started: CSRs made before it are stale.
    pub started: BTreeMap<String, i64>,
    /// The nodes restart after a shutdown: one whose kubelet has not reported Ready since its VM
    /// started may bootstrap again (OpenShift's graceful restart: the node-bootstrapper's client CSRs of
    /// kubelets whose certificates expired while the cluster was down are approved).
    pub rejoin: bool,
}

/// How far a CSR may predate its VM's start (clocks of the hypervisor and the API server differ):
/// the machine-approver's `maxMachineClockSkew`.
pub const MAX_CLOCK_SKEW: i64 = 10;

/// Per node, the newest client CSR [`decide`] would approve, pending or decided: `(name, created)`.
/// Only that one may be approved (openshift/cluster-machine-approver approves one bootstrap client
/// CSR per machine, `authorizeNodeClientCSR`: refused once the machine has a node).
pub fn newest_clients<'a>(
    verdicts: impl IntoIterator<Item = (&'a Csr, &'a Verdict)>,
) -> BTreeMap<String, (String, i64)> {
    let mut out: BTreeMap<String, (String, i64)> = BTreeMap::new();
    for (csr, v) in verdicts {
        if let Verdict::Approve {
            node,
            kind: Kind::Client,
        } = v
        {
            let t = csr.created.unwrap_or(i64::MIN);
            let newer = out
                .get(node)
                .is_none_or(|(n, old)| (t, &csr.name) > (*old, n));
            if newer {
                out.insert(node.clone(), (csr.name.clone(), t));
            }
        }
    }
    out
}

/// What holds back an otherwise approvable CSR, gathered from one look at all the CSRs and Nodes.
#[derive(Debug, Clone, Default)]
pub struct Holds {
    /// Per node, its newest approvable client CSR ([`newest_clients`]).
    pub newest: BTreeMap<String, (String, i64)>,
    /// Per node, a client CSR of it already approved, made since its VM started (any, without a start).
    pub approved_client: BTreeMap<String, String>,
    /// The expected nodes that already have a Node object (they joined).
    pub existing: BTreeSet<String>,
    /// Node name → Unix time its VM started ([`Expected::started`]).
    pub started: BTreeMap<String, i64>,
}

impl Holds {
    /// From the judged CSRs (pending and decided), the Nodes that exist, and the VMs' starts.
    pub fn new<'a>(
        judged: impl IntoIterator<Item = (&'a Csr, &'a Verdict)> + Clone,
        existing: BTreeSet<String>,
        started: &BTreeMap<String, i64>,
    ) -> Holds {
        let mut h = Holds {
            newest: newest_clients(judged.clone()),
            approved_client: BTreeMap::new(),
            existing,
            started: started.clone(),
        };
        for (csr, v) in judged {
            if let Verdict::Approve {
                node,
                kind: Kind::Client,
            } = v
            {
                if csr.decided.as_deref() == Some("Approved") && h.stale(csr, node).is_none() {
                    h.approved_client.insert(node.clone(), csr.name.clone());
                }
            }
        }
        h
    }

    /// Made before `node`'s VM started (less [`MAX_CLOCK_SKEW`]; the machine-approver's "CSR creation
    /// time not in range" of `authorizeNodeClientCSR`).
    fn stale(&self, csr: &Csr, node: &str) -> Option<String> {
        let start = self.started.get(node)?;
        match csr.created {
            Some(t) if t >= start - MAX_CLOCK_SKEW => None,
            Some(t) => Some(format!(
                "created {}s before the VM of node {node} started: stale, left alone",
                start - t
            )),
            None => Some("no creationTimestamp to compare with the VM's start".into()),
        }
    }
}

/// Why an otherwise approvable pending CSR is held back: stale (made before its node's VM started), or
/// a client CSR for a node that already has a Node object (openshift/cluster-machine-approver
/// `authorizeNodeClientCSR`: "node ... already exists", the bootstrap identity only ever joins a new
/// node), or for a node that already has an approved client CSR, or that is not its node's newest
/// ([`newest_clients`]): one client certificate per node.
pub fn held_back(csr: &Csr, node: &str, kind: Kind, holds: &Holds) -> Option<String> {
    if let Some(why) = holds.stale(csr, node) {
        return Some(why);
    }
    if kind != Kind::Client {
        return None;
    }
    if holds.existing.contains(node) {
        return Some(format!(
            "node {node} already exists: a bootstrap client CSR is approved only for a node that has not joined"
        ));
    }
    if let Some(done) = holds.approved_client.get(node).filter(|n| **n != csr.name) {
        return Some(format!(
            "node {node} already has an approved client CSR ({done}): only one is approved per node"
        ));
    }
    match holds.newest.get(node) {
        Some((name, _)) if *name != csr.name => Some(format!(
            "not the newest client CSR of node {node} ({name} is): only one is approved per node"
        )),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Client,
    Serving,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Client => "client",
            Kind::Serving => "serving",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approve {
        node: String,
        kind: Kind,
    },
    /// Names an expected node but fails a check: never approved, and the run fails.
    Refused {
        node: String,
        reason: String,
    },
    /// Not for an expected node (or not a kubelet CSR at all): left alone, reported.
    Unexpected {
        reason: String,
    },
}

/// The decision for one pending CSR.
pub fn decide(csr: &Csr, exp: &Expected) -> Verdict {
    let kind = match csr.signer.as_str() {
        CLIENT_SIGNER => Kind::Client,
        SERVING_SIGNER => Kind::Serving,
        other => {
            return Verdict::Unexpected {
                reason: format!("signer {other} is not a kubelet signer"),
            }
        }
    };
    let user_node = csr.username.strip_prefix(NODE_PREFIX);
    let req = match parse_request(&csr.request) {
        Ok(r) => r,
        Err(e) => {
            return match user_node.filter(|n| exp.nodes.contains_key(*n)) {
                Some(n) => refused(n, e.to_string()),
                None => Verdict::Unexpected {
                    reason: e.to_string(),
                },
            }
        }
    };
    let cn_node = match req.common_names.as_slice() {
        [cn] => cn.strip_prefix(NODE_PREFIX),
        _ => None,
    };
    // The node the CSR is about: its subject, or (serving) its requestor.
    let claimed = [
        cn_node,
        (kind == Kind::Serving).then_some(user_node).flatten(),
    ]
    .into_iter()
    .flatten()
    .find(|n| exp.nodes.contains_key(*n));
    let Some(node) = claimed else {
        return Verdict::Unexpected {
            reason: match (cn_node, &req.common_names[..]) {
                (Some(n), _) => format!("for node {n}, which is not one of the expected nodes"),
                (None, [cn]) => format!("subject CN={cn} is not a node"),
                _ => "the subject has no single CN".into(),
            },
        };
    };
    let problem = match kind {
        Kind::Client => client_problem(csr, &req, node, exp),
        Kind::Serving => serving_problem(csr, &req, node, exp),
    };
    match problem {
        Some(reason) => refused(node, reason),
        None => Verdict::Approve {
            node: node.to_string(),
            kind,
        },
    }
}

fn refused(node: &str, reason: String) -> Verdict {
    Verdict::Refused {
        node: node.to_string(),
        reason,
    }
}

/// Subject `CN=system:node:<node>, O=system:nodes` exactly.
fn subject_problem(req: &Request, node: &str) -> Option<String> {
    let want_cn = format!("{NODE_PREFIX}{node}");
    if req.common_names != [want_cn.clone()] {
        return Some(format!(
            "subject CN is {:?}, not {want_cn}",
            req.common_names
        ));
    }
    if req.organizations != [NODES_GROUP] {
        return Some(format!(
            "subject O is {:?}, not {NODES_GROUP}",
            req.organizations
        ));
    }
    None
}

/// Usages within `allowed` and holding `needed`.
fn usage_problem(csr: &Csr, allowed: &[&str], needed: &str) -> Option<String> {
    if let Some(u) = csr.usages.iter().find(|u| !allowed.contains(&u.as_str())) {
        return Some(format!("usage {u:?} is not one a kubelet asks for"));
    }
    (!csr.usages.iter().any(|u| u == needed)).then(|| format!("usages lack {needed:?}"))
}

fn client_problem(csr: &Csr, req: &Request, node: &str, exp: &Expected) -> Option<String> {
    let groups_ok = exp.bootstrap_groups.iter().all(|g| csr.groups.contains(g));
    if csr.username != exp.bootstrap_user || !groups_ok {
        return Some(format!(
            "requested by {} (groups {}), not by the node bootstrapper {} (groups {})",
            csr.username,
            csr.groups.join(", "),
            exp.bootstrap_user,
            exp.bootstrap_groups.join(", ")
        ));
    }
    subject_problem(req, node)
        .or_else(|| {
            let n = req.dns_names.len() + req.ips.len() + req.other_sans.len();
            (n > 0).then(|| format!("a client certificate request with {n} SANs"))
        })
        .or_else(|| {
            usage_problem(
                csr,
                &["digital signature", "key encipherment", "client auth"],
                "client auth",
            )
        })
}

fn serving_problem(csr: &Csr, req: &Request, node: &str, exp: &Expected) -> Option<String> {
    let want_user = format!("{NODE_PREFIX}{node}");
    if csr.username != want_user || !csr.groups.iter().any(|g| g == NODES_GROUP) {
        return Some(format!(
            "requested by {} (groups {}), not by {want_user} in {NODES_GROUP}",
            csr.username,
            csr.groups.join(", ")
        ));
    }
    if let Some(p) = subject_problem(req, node) {
        return Some(p);
    }
    let extra = exp.nodes.get(node).map(Vec::as_slice).unwrap_or_default();
    let short = node.split('.').next().unwrap_or(node);
    let name_ok = |d: &str| {
        d.eq_ignore_ascii_case(node)
            || d.eq_ignore_ascii_case(short)
            || extra.iter().any(|e| e.eq_ignore_ascii_case(d))
    };
    let ip_ok = |ip: &IpAddr| extra.iter().any(|e| e.parse::<IpAddr>().ok() == Some(*ip));
    if let Some(d) = req.dns_names.iter().find(|d| !name_ok(d)) {
        return Some(format!("SAN DNS:{d} is not a name of node {node}"));
    }
    if let Some(ip) = req.ips.iter().find(|ip| !ip_ok(ip)) {
        return Some(format!(
            "SAN IP:{ip} is not an address of node {node} (known: {})",
            extra.join(", ")
        ));
    }
    if let Some(o) = req.other_sans.first() {
        return Some(format!("SAN {o} is not a host name or IP address"));
    }
    if req.dns_names.is_empty() && req.ips.is_empty() {
        return Some("a serving certificate request without SANs".into());
    }
    usage_problem(
        csr,
        &["digital signature", "key encipherment", "server auth"],
        "server auth",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    const NODE: &str = "worker-3.lab.example.com";

    fn request(cn: &str, org: &str, sans: Vec<SanType>) -> String {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        dn.push(DnType::OrganizationName, org);
        p.distinguished_name = dn;
        p.subject_alt_names = sans;
        let key = KeyPair::generate().expect("key");
        let pem = p.serialize_request(&key).expect("csr").pem().expect("pem");
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn expected() -> Expected {
        Expected {
            nodes: BTreeMap::from([(NODE.to_string(), vec!["192.0.2.13".to_string()])]),
            bootstrap_user: DEFAULT_BOOTSTRAP_USER.into(),
            bootstrap_groups: vec![DEFAULT_BOOTSTRAP_GROUP.into()],
            started: BTreeMap::new(),
            rejoin: false,
        }
    }

    fn client_csr(cn: &str, user: &str, groups: &[&str]) -> Csr {
        Csr {
            name: "csr-a".into(),
            signer: CLIENT_SIGNER.into(),
            username: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            usages: vec![
                "digital signature".into(),
                "key encipherment".into(),
                "client auth".into(),
            ],
            request: request(cn, "system:nodes", vec![]),
            decided: None,
            created: None,
        }
    }

    fn bootstrapper_groups() -> Vec<&'static str> {
        vec![
            "system:serviceaccounts",
            DEFAULT_BOOTSTRAP_GROUP,
            "system:authenticated",
        ]
    }

    fn serving_csr(sans: Vec<SanType>) -> Csr {
        Csr {
            name: "csr-s".into(),
            signer: SERVING_SIGNER.into(),
            username: format!("system:node:{NODE}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            usages: vec![
                "digital signature".into(),
                "key encipherment".into(),
                "server auth".into(),
            ],
            request: request(&format!("system:node:{NODE}"), "system:nodes", sans),
            decided: None,
            created: None,
        }
    }

    fn dns(n: &str) -> SanType {
        SanType::DnsName(n.try_into().expect("dns"))
    }

    fn ip(a: &str) -> SanType {
        SanType::IpAddress(a.parse().expect("ip"))
    }

    #[test]
    fn only_the_newest_client_csr_made_after_the_vm_started_is_approved() {
        let groups = bootstrapper_groups();
        let cn = format!("system:node:{NODE}");
        let at = |name: &str, t: i64| Csr {
            name: name.into(),
            created: Some(t),
            ..client_csr(&cn, DEFAULT_BOOTSTRAP_USER, &groups)
        };
        let (old, new, stale) = (
            at("csr-old", 1000),
            at("csr-new", 1050),
            at("csr-stale", 900),
        );
        let exp = expected();
        let verdicts: Vec<(Csr, Verdict)> = [old, new, stale]
            .into_iter()
            .map(|c| {
                let v = decide(&c, &exp);
                (c, v)
            })
            .collect();
        let started = BTreeMap::from([(NODE.to_string(), 990)]);
        let holds = Holds::new(
            verdicts.iter().map(|(c, v)| (c, v)),
            BTreeSet::new(),
            &started,
        );
        assert_eq!(holds.newest[NODE], ("csr-new".to_string(), 1050));
        let held = |i: usize| held_back(&verdicts[i].0, NODE, Kind::Client, &holds);
        assert!(
            held(0).unwrap().contains("not the newest client CSR"),
            "{:?}",
            held(0)
        );
        assert_eq!(held(1), None);
        assert!(
            held(2).unwrap().contains("90s before the VM"),
            "{:?}",
            held(2)
        );
        // Within the machine-approver's clock skew: fresh.
        let skewed = at("csr-skew", 990 - MAX_CLOCK_SKEW);
        let only = Holds {
            newest: BTreeMap::from([(NODE.to_string(), ("csr-skew".to_string(), 980))]),
            ..holds.clone()
        };
        assert_eq!(held_back(&skewed, NODE, Kind::Client, &only), None);
        // A serving CSR is not subject to the one-per-node rule, only to freshness.
        let serving = Csr {
            created: Some(1000),
            ..serving_csr(vec![dns(NODE)])
        };
        assert_eq!(held_back(&serving, NODE, Kind::Serving, &holds), None);
        let serving = Csr {
            created: Some(100),
            ..serving_csr(vec![dns(NODE)])
        };
        assert!(held_back(&serving, NODE, Kind::Serving, &holds).is_some());
    }

    #[test]
    fn a_client_csr_for_a_node_that_exists_is_not_approved() {
        let groups = bootstrapper_groups();
        let csr = Csr {
            created: Some(1000),
            ..client_csr(
                &format!("system:node:{NODE}"),
                DEFAULT_BOOTSTRAP_USER,
                &groups,
            )
        };
        let v = decide(&csr, &expected());
        let started = BTreeMap::from([(NODE.to_string(), 990)]);
        let joined = Holds::new([(&csr, &v)], BTreeSet::from([NODE.to_string()]), &started);
        assert!(held_back(&csr, NODE, Kind::Client, &joined)
            .unwrap()
            .contains("already exists"));
        // Its serving CSR is still approved (the kubelet of the joined node asks for it).
        let serving = Csr {
            created: Some(1000),
            ..serving_csr(vec![dns(NODE)])
        };
        assert_eq!(held_back(&serving, NODE, Kind::Serving, &joined), None);
        let new = Holds::new([(&csr, &v)], BTreeSet::new(), &started);
        assert_eq!(held_back(&csr, NODE, Kind::Client, &new), None);
    }

    #[test]
    fn one_client_csr_per_node_counts_those_already_approved() {
        let groups = bootstrapper_groups();
        let cn = format!("system:node:{NODE}");
        let at = |name: &str, t: i64, decided: Option<&str>| Csr {
            name: name.into(),
            created: Some(t),
            decided: decided.map(str::to_string),
            ..client_csr(&cn, DEFAULT_BOOTSTRAP_USER, &groups)
        };
        let exp = expected();
        let started = BTreeMap::from([(NODE.to_string(), 990)]);
        // Approved at 1000; a newer one pending at 1050 (the Node not created yet): not a second certificate.
        let judge = |csrs: Vec<Csr>| -> (Vec<(Csr, Verdict)>, Holds) {
            let judged: Vec<(Csr, Verdict)> = csrs
                .into_iter()
                .map(|c| {
                    let v = decide(&c, &exp);
                    (c, v)
                })
                .collect();
            let holds = Holds::new(
                judged.iter().map(|(c, v)| (c, v)),
                BTreeSet::new(),
                &started,
            );
            (judged, holds)
        };
        let (judged, holds) = judge(vec![
            at("csr-1", 1000, Some("Approved")),
            at("csr-2", 1050, None),
        ]);
        assert!(held_back(&judged[1].0, NODE, Kind::Client, &holds)
            .unwrap()
            .contains("already has an approved client CSR (csr-1)"));
        // One approved before the VM started (the machine it replaces) does not count; one denied neither.
        let (judged, holds) = judge(vec![
            at("csr-0", 500, Some("Approved")),
            at("csr-1", 1000, Some("Denied")),
            at("csr-2", 1050, None),
        ]);
        assert_eq!(held_back(&judged[2].0, NODE, Kind::Client, &holds), None);
    }

    #[test]
    fn good_client_csr_is_approved() {
        let csr = client_csr(
            &format!("system:node:{NODE}"),
            DEFAULT_BOOTSTRAP_USER,
            &bootstrapper_groups(),
        );
        assert_eq!(
            decide(&csr, &expected()),
            Verdict::Approve {
                node: NODE.into(),
                kind: Kind::Client
            }
        );
    }

    #[test]
    fn client_csr_for_another_node_is_left_alone() {
        let csr = client_csr(
            "system:node:worker-9.lab.example.com",
            DEFAULT_BOOTSTRAP_USER,
            &bootstrapper_groups(),
        );
        let v = decide(&csr, &expected());
        assert!(
            matches!(&v, Verdict::Unexpected { reason } if reason.contains("worker-9")),
            "{v:?}"
        );
        let csr = client_csr("evil", DEFAULT_BOOTSTRAP_USER, &bootstrapper_groups());
        assert!(matches!(
            decide(&csr, &expected()),
            Verdict::Unexpected { .. }
        ));
    }

    #[test]
    fn client_csr_with_wrong_organization_is_refused() {
        let mut csr = client_csr(
            &format!("system:node:{NODE}"),
            DEFAULT_BOOTSTRAP_USER,
            &bootstrapper_groups(),
        );
        csr.request = request(&format!("system:node:{NODE}"), "system:masters", vec![]);
        let v = decide(&csr, &expected());
        assert!(
            matches!(&v, Verdict::Refused { reason, .. } if reason.contains("system:masters")),
            "{v:?}"
        );
    }

    #[test]
    fn client_csr_from_another_requestor_is_refused() {
        let cn = format!("system:node:{NODE}");
        let csr = client_csr(&cn, "mallory", &["system:authenticated"]);
        let v = decide(&csr, &expected());
        assert!(
            matches!(&v, Verdict::Refused { node, reason } if node == NODE && reason.contains("mallory")),
            "{v:?}"
        );
        // The right user without the bootstrap group is not the bootstrapper either.
        let csr = client_csr(&cn, DEFAULT_BOOTSTRAP_USER, &["system:authenticated"]);
        assert!(matches!(decide(&csr, &expected()), Verdict::Refused { .. }));
        // A node may not ask for another node's client certificate.
        let csr = client_csr(
            &cn,
            "system:node:worker-0.lab.example.com",
            &["system:nodes"],
        );
        assert!(matches!(decide(&csr, &expected()), Verdict::Refused { .. }));
    }

    #[test]
    fn good_serving_csr_is_approved() {
        let csr = serving_csr(vec![dns(NODE), dns("worker-3"), ip("192.0.2.13")]);
        assert_eq!(
            decide(&csr, &expected()),
            Verdict::Approve {
                node: NODE.into(),
                kind: Kind::Serving
            }
        );
    }

    #[test]
    fn serving_csr_with_an_extra_san_is_refused() {
        for extra in [ip("192.0.2.99"), dns("api.lab.example.com")] {
            let csr = serving_csr(vec![dns(NODE), ip("192.0.2.13"), extra]);
            let v = decide(&csr, &expected());
            assert!(
                matches!(&v, Verdict::Refused { reason, .. } if reason.contains("SAN")),
                "{v:?}"
            );
        }
    }

    #[test]
    fn serving_csr_from_another_node_is_refused() {
        let mut csr = serving_csr(vec![dns(NODE)]);
        csr.username = "system:node:worker-0.lab.example.com".into();
        let v = decide(&csr, &expected());
        assert!(
            matches!(&v, Verdict::Refused { reason, .. } if reason.contains("worker-0")),
            "{v:?}"
        );
        let mut csr = serving_csr(vec![dns(NODE)]);
        csr.groups = vec!["system:authenticated".into()];
        assert!(matches!(decide(&csr, &expected()), Verdict::Refused { .. }));
    }

    #[test]
    fn other_signers_and_garbage_are_unexpected() {
        let mut csr = serving_csr(vec![dns(NODE)]);
        csr.signer = "example.com/custom".into();
        assert!(matches!(
            decide(&csr, &expected()),
            Verdict::Unexpected { .. }
        ));
        let mut csr = client_csr("x", "someone", &[]);
        csr.request = "bm90IGEgcmVxdWVzdA==".into();
        assert!(matches!(
            decide(&csr, &expected()),
            Verdict::Unexpected { .. }
        ));
    }

    #[test]
    fn parse_reads_subject_and_sans() {
        let r = parse_request(&request(
            "system:node:n1",
            "system:nodes",
            vec![dns("n1"), ip("2001:db8::1")],
        ))
        .expect("parses");
        assert_eq!(r.common_names, ["system:node:n1"]);
        assert_eq!(r.organizations, ["system:nodes"]);
        assert_eq!(r.dns_names, ["n1"]);
        assert_eq!(r.ips, ["2001:db8::1".parse::<IpAddr>().unwrap()]);
        assert!(matches!(parse_request("!!"), Err(CsrError::Base64(_))));
    }

    #[test]
    fn decided_csrs_are_recognised() {
        let obj = serde_json::json!({"metadata": {"name": "c"}, "spec": {"signerName": CLIENT_SIGNER},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        assert_eq!(Csr::from_object(&obj).decided.as_deref(), Some("Approved"));
    }
}
