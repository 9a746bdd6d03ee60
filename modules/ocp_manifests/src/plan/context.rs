//! What the stages share: the options, the problems and warnings one stage found, and the parts
//! earlier stages produced.

use std::fmt;
use std::net::IpAddr;

use crate::model::{Options, PlanCapabilities, PlanHost, PlanMirror, PlanProxy};

use super::addresses::Addresses;
use super::features::Features;
use super::infra::Infra;
use super::networks::Networks;
use super::nodes::Nodes;
use super::topology::Topo;
use super::vips::Vips;

/// How a rule that is stricter than `openshift-install`'s offline checks says so, before it says
/// what would go wrong during the install.
pub(super) const STRICTER: &str =
    "The installer does not check this offline; the install would fail because";

/// One broken rule: where (`nodes[2].mac`), which rule (`mac-unique`), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub rule: &'static str,
    pub msg: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [{}]", self.path, self.msg, self.rule)
    }
}

/// The problems and warnings of one stage, in the order the stage found them.
#[derive(Default)]
pub(super) struct Findings {
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
}

impl Findings {
    pub fn err(&mut self, path: impl Into<String>, rule: &'static str, msg: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            rule,
            msg: msg.into(),
        });
    }

    pub fn warn(&mut self, msg: impl Into<String>) {
        self.warnings.push(msg.into());
    }

    /// An IP address, or an `ip-syntax` problem at `path`.
    pub fn ip(&mut self, s: &str, path: &str) -> Option<IpAddr> {
        match s.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.err(path, "ip-syntax", format!("'{s}' is not an IP address"));
                None
            }
        }
    }

    /// The stage's result together with what it found.
    pub fn with<T>(self, part: T) -> Staged<T> {
        Staged { part, found: self }
    }

    /// Keep what a stage found (after everything found before it) and hand back its part.
    pub fn take<T>(&mut self, staged: Staged<T>) -> T {
        self.problems.extend(staged.found.problems);
        self.warnings.extend(staged.found.warnings);
        staged.part
    }
}

/// What one stage returns: its part of the plan and its problems and warnings.
pub(super) struct Staged<T> {
    pub part: T,
    pub found: Findings,
}

/// The parsed input and everything the stages produced so far. `plan()` runs the stages in a
/// fixed order, so a stage reads only fields that earlier stages have filled.
pub(super) struct Ctx<'o> {
    pub o: &'o Options,
    /// The OpenShift minor version (14 when the version is unreadable, so later rules still run).
    pub minor: u32,
    /// Pull-secret `auth` values: secrets to mask in all output.
    pub secrets: Vec<String>,
    pub net: Networks,
    pub infra: Infra,
    pub nodes: Nodes,
    pub vips: Vips,
    pub addresses: Addresses,
    pub topo: Topo,
    pub rendezvous: Option<IpAddr>,
    pub proxy: Option<PlanProxy>,
    pub mirrors: Vec<PlanMirror>,
    pub capabilities: Option<PlanCapabilities>,
    pub features: Features,
    pub hosts: Vec<PlanHost>,
}

impl<'o> Ctx<'o> {
    pub fn new(o: &'o Options) -> Self {
        Ctx {
            o,
            minor: 14,
            secrets: Vec::new(),
            net: Networks::default(),
            infra: Infra::default(),
            nodes: Nodes::default(),
            vips: Vips::default(),
            addresses: Addresses::default(),
            topo: Topo::default(),
            rendezvous: None,
            proxy: None,
            mirrors: Vec::new(),
            capabilities: None,
            features: Features::default(),
            hosts: Vec::new(),
        }
    }
}
