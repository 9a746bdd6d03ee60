//! `capabilities`: the names and baselines the cluster's OpenShift version knows, and what the
//! enabled set (baseline plus additional) must hold, as the installer checks it.
//!
//! Names and baselines: openshift/api `config/v1/types_cluster_version.go` on each `release-4.N`
//! branch — `KnownClusterVersionCapabilities`, the `ClusterVersionCapabilitySet` constants (the
//! `+kubebuilder:validation:Enum` of `baselineCapabilitySet`) and `ClusterVersionCapabilitySets`.
//! No release up to 4.23 defines a `v4.19` (or later) baseline: `v4.18` is the newest. Rules:
//! openshift/installer `pkg/types/validation/installconfig.go` `ValidateInstallConfig`, the
//! `c.Capabilities != nil` block.

use crate::model::{CapabilitiesOpt, PlanCapabilities};

use super::context::{Ctx, Findings, Staged};

/// Capabilities of 4.14 (`release-4.14` `KnownClusterVersionCapabilities`), in upstream order.
const CAPS_4_14: &[&str] = &[
    "baremetal",
    "Console",
    "Insights",
    "marketplace",
    "Storage",
    "openshift-samples",
    "CSISnapshot",
    "NodeTuning",
    "MachineAPI",
    "Build",
    "DeploymentConfig",
    "ImageRegistry",
];

/// Each capability with the first minor version whose openshift/api knows it.
const ADDED: &[(&str, u32)] = &[
    ("OperatorLifecycleManager", 15),
    ("CloudCredential", 15),
    ("Ingress", 16),
    ("CloudControllerManager", 16),
    ("OperatorLifecycleManagerV1", 18),
    ("CompatibilityRequirements", 23),
    ("ClusterAPI", 23),
];

/// The capability names OpenShift 4.`minor` knows.
pub fn known_capabilities(minor: u32) -> Vec<&'static str> {
    let mut v = CAPS_4_14.to_vec();
    v.extend(ADDED.iter().filter(|(_, m)| minor >= *m).map(|(n, _)| *n));
    v
}

/// The newest `v4.N` baseline any release defines.
const NEWEST_BASELINE: u32 = 18;

/// The `baselineCapabilitySet` values OpenShift 4.`minor` accepts: `None`, `v4.11` up to its own
/// version (at most `v4.18`), `vCurrent`.
pub fn baseline_sets(minor: u32) -> Vec<String> {
    let mut v = vec!["None".to_string()];
    v.extend((11..=minor.min(NEWEST_BASELINE)).map(|m| format!("v4.{m}")));
    v.push("vCurrent".into());
    v
}

/// `ClusterVersionCapabilitySets[set]` of OpenShift 4.`minor` (`None` → empty). `vCurrent` is
/// everything the version knows (true of every release branch up to 4.23).
pub fn baseline_members(set: &str, minor: u32) -> Vec<&'static str> {
    let base = |m: u32| -> Vec<&'static str> {
        let mut v: Vec<&str> = vec![
            "baremetal",
            "marketplace",
            "openshift-samples",
            "MachineAPI",
        ];
        if m >= 12 {
            v.extend(["Console", "Insights", "Storage", "CSISnapshot"]);
        }
        if m >= 13 {
            v.push("NodeTuning");
        }
        if m >= 14 {
            v.extend(["Build", "DeploymentConfig", "ImageRegistry"]);
        }
        if m >= 15 {
            v.extend(["OperatorLifecycleManager", "CloudCredential"]);
        }
        if m >= 16 {
            v.extend(["Ingress", "CloudControllerManager"]);
        }
        if m >= 18 {
            v.push("OperatorLifecycleManagerV1");
        }
        v
    };
    match set {
        "None" => vec![],
        "vCurrent" => known_capabilities(minor),
        s => s
            .strip_prefix("v4.")
            .and_then(|m| m.parse::<u32>().ok())
            .map(base)
            .unwrap_or_default(),
    }
}

pub(super) fn check(cx: &Ctx) -> Staged<Option<PlanCapabilities>> {
    let mut f = Findings::default();
    let caps =
        cx.o.capabilities
            .as_ref()
            .map(|cap| check_one(&mut f, cx, cap));
    f.with(caps)
}

fn check_one(f: &mut Findings, cx: &Ctx, cap: &CapabilitiesOpt) -> PlanCapabilities {
    let known = known_capabilities(cx.minor);
    let extra = cap
        .additional_enabled_capabilities
        .clone()
        .unwrap_or_default();
    for (i, name) in extra.iter().enumerate() {
        if !known.contains(&name.as_str()) {
            f.err(
                format!("capabilities.additional_enabled_capabilities[{i}]"),
                "capability-known",
                format!(
                    "'{name}' is not a capability OpenShift 4.{} knows ({})",
                    cx.minor,
                    known.join(", ")
                ),
            );
        }
    }
    let sets = baseline_sets(cx.minor);
    let baseline = cap.baseline_capability_set.as_deref();
    if baseline.is_none() {
        // installer pkg/types/validation `validateCapabilities`, run whenever `capabilities` is
        // set: the baselineCapabilitySet must be one of configv1.ClusterVersionCapabilitySets, and
        // an absent one is "" (`Unsupported value: ""`). vCurrent is the cluster-version operator's
        // default only when the whole `capabilities` block is absent.
        f.err(
            "capabilities.baseline_capability_set",
            "capability-baseline-required",
            format!(
                "capabilities needs a baseline_capability_set (one of {}): the installer refuses additional_enabled_capabilities without one; use vCurrent for the default set plus the additional ones",
                sets.join(", ")
            ),
        );
    } else if let Some(b) = baseline.filter(|b| !sets.iter().any(|s| s == b)) {
        f.err(
            "capabilities.baseline_capability_set",
            "capability-known",
            format!(
                "'{b}' is not a baseline OpenShift 4.{} knows ({})",
                cx.minor,
                sets.join(", ")
            ),
        );
    } else {
        dependencies(f, cx, baseline.unwrap_or("vCurrent"), &extra);
    }
    PlanCapabilities {
        baseline_capability_set: cap.baseline_capability_set.clone(),
        additional_enabled_capabilities: extra,
    }
}

/// What the enabled set must hold (`ValidateInstallConfig`): the installer's baseline default is
/// `vCurrent`; each rule applies only where the version knows the capabilities it names.
fn dependencies(f: &mut Findings, cx: &Ctx, baseline: &str, extra: &[String]) {
    let mut enabled = baseline_members(baseline, cx.minor);
    enabled.extend(extra.iter().map(String::as_str));
    let has = |n: &str| enabled.contains(&n);
    let knows = |n: &str| known_capabilities(cx.minor).contains(&n);
    const PATH: &str = "capabilities.additional_enabled_capabilities";
    if baseline == "None" && cx.topo.platform == "baremetal" && !has("baremetal") {
        f.err(
            PATH,
            "capability-baremetal",
            "platform baremetal requires the baremetal capability",
        );
    }
    if knows("OperatorLifecycleManager") && has("marketplace") && !has("OperatorLifecycleManager") {
        f.err(
            PATH,
            "capability-marketplace",
            format!(
                "the marketplace capability requires the OperatorLifecycleManager capability (baseline {baseline} enables marketplace{})",
                if baseline == "None" { " only when listed" } else { ", add OperatorLifecycleManager" }
            ),
        );
    }
    // Only baremetal and none run without the cloud-credential operator; only they, and external
    // without its own cloud controller manager, without the cloud-controller-manager operator.
    let platform = cx.topo.platform;
    if platform == "external" && knows("CloudCredential") && !has("CloudCredential") {
        f.err(
            PATH,
            "capability-cloud-credential",
            format!("disabling CloudCredential capability available only for baremetal platforms (platform {platform}, baseline {baseline})"),
        );
    }
    let external_ccm =
        cx.o.external
            .as_ref()
            .and_then(|e| e.cloud_controller_manager.as_deref());
    if platform == "external"
        && external_ccm == Some("External")
        && knows("CloudControllerManager")
        && !has("CloudControllerManager")
    {
        f.err(
            PATH,
            "capability-cloud-controller-manager",
            "disabling CloudControllerManager on External platform supported only with cloudControllerManager value none",
        );
    }
    if knows("Ingress") && !has("Ingress") {
        f.err(
            PATH,
            "capability-ingress",
            format!("the Ingress capability is required (baseline {baseline} does not enable it)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::plan::fixtures::*;

    /// openshift/api `release-4.N` `KnownClusterVersionCapabilities`, as read from each branch.
    #[test]
    fn names_per_version_match_openshift_api() {
        assert_eq!(known_capabilities(14).len(), 12);
        let k15 = known_capabilities(15);
        assert!(k15.contains(&"OperatorLifecycleManager") && !k15.contains(&"Ingress"));
        let k17 = known_capabilities(17);
        assert_eq!(k17.len(), 16);
        assert!(!k17.contains(&"OperatorLifecycleManagerV1"));
        let k18 = known_capabilities(18);
        assert!(
            k18.contains(&"OperatorLifecycleManagerV1"),
            "OLM v1 is OperatorLifecycleManagerV1 from 4.18"
        );
        assert!(!k18.iter().any(|c| c.contains("-v1")));
        assert_eq!(known_capabilities(19), k18, "4.19 to 4.22 add none");
        assert_eq!(known_capabilities(22), k18);
        assert!(known_capabilities(23).contains(&"ClusterAPI"));
    }

    /// The `+kubebuilder:validation:Enum` of `baselineCapabilitySet` per release branch.
    #[test]
    fn baselines_per_version_match_openshift_api() {
        assert_eq!(
            baseline_sets(14).join(";"),
            "None;v4.11;v4.12;v4.13;v4.14;vCurrent"
        );
        assert_eq!(
            baseline_sets(17).last().map(String::as_str),
            Some("vCurrent")
        );
        assert!(baseline_sets(17).contains(&"v4.17".to_string()));
        assert!(
            !baseline_sets(17).contains(&"v4.18".to_string()),
            "4.17 does not know v4.18"
        );
        // 4.19 (and every later 4.x up to 4.23) still ends at v4.18: there is no v4.19 baseline.
        assert_eq!(baseline_sets(19), baseline_sets(18));
        assert!(!baseline_sets(23).contains(&"v4.19".to_string()));
    }

    /// `ClusterVersionCapabilitySets` (release-4.19): v4.11 has 4 members, v4.14 12, v4.18 17.
    #[test]
    fn baseline_members_match_openshift_api() {
        assert_eq!(
            baseline_members("v4.11", 19),
            vec![
                "baremetal",
                "marketplace",
                "openshift-samples",
                "MachineAPI"
            ]
        );
        assert_eq!(baseline_members("v4.14", 19).len(), 12);
        assert!(!baseline_members("v4.14", 19).contains(&"OperatorLifecycleManager"));
        assert_eq!(baseline_members("v4.16", 19).len(), 16);
        assert_eq!(baseline_members("v4.18", 19).len(), 17);
        assert_eq!(baseline_members("vCurrent", 19), known_capabilities(19));
        assert!(baseline_members("None", 19).is_empty());
    }

    fn caps(version: &str, c: serde_json::Value) -> serde_json::Value {
        with(
            with(compact(), "version", json!(version)),
            "capabilities",
            c,
        )
    }

    /// installer `validateCapabilities`: with a `capabilities` block the baseline must be a known
    /// set, so additional capabilities alone are `Unsupported value: ""`.
    #[test]
    fn rule_capability_baseline_required() {
        fails(
            caps(
                "4.16",
                json!({"additional_enabled_capabilities": ["baremetal", "Ingress"]}),
            ),
            "capabilities.baseline_capability_set",
            "capability-baseline-required",
        );
        fails(
            caps("4.18", json!({})),
            "capabilities.baseline_capability_set",
            "capability-baseline-required",
        );
        ok_plan(&caps(
            "4.16",
            json!({"baseline_capability_set": "vCurrent", "additional_enabled_capabilities": ["baremetal"]}),
        ));
    }

    #[test]
    fn rule_capability_known_per_version() {
        fails(
            caps("4.16", json!({"baseline_capability_set": "v9"})),
            "capabilities.baseline_capability_set",
            "capability-known",
        );
        // A baseline only where the version knows it.
        fails(
            caps("4.17", json!({"baseline_capability_set": "v4.18"})),
            "capabilities.baseline_capability_set",
            "capability-known",
        );
        fails(
            caps("4.19", json!({"baseline_capability_set": "v4.19"})),
            "capabilities.baseline_capability_set",
            "capability-known",
        );
        ok_plan(&caps("4.18", json!({"baseline_capability_set": "v4.18"})));
        ok_plan(&caps("4.19", json!({"baseline_capability_set": "v4.18"})));
        fails(
            caps(
                "4.16",
                json!({"additional_enabled_capabilities": ["Consolee"]}),
            ),
            "capabilities.additional_enabled_capabilities[0]",
            "capability-known",
        );
        // The old misspelling is no capability; OLM v1 only from 4.18.
        fails(
            caps(
                "4.18",
                json!({"additional_enabled_capabilities": ["OperatorLifecycleManager-v1"]}),
            ),
            "capabilities.additional_enabled_capabilities[0]",
            "capability-known",
        );
        fails(
            caps(
                "4.17",
                json!({"additional_enabled_capabilities": ["OperatorLifecycleManagerV1"]}),
            ),
            "capabilities.additional_enabled_capabilities[0]",
            "capability-known",
        );
        ok_plan(&caps(
            "4.18",
            json!({"baseline_capability_set": "vCurrent", "additional_enabled_capabilities": ["OperatorLifecycleManagerV1"]}),
        ));
    }

    /// installer `ValidateInstallConfig`: "the Ingress capability is required" on the enabled set.
    #[test]
    fn rule_capability_ingress() {
        fails(
            caps(
                "4.16",
                json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["baremetal"]}),
            ),
            "capabilities.additional_enabled_capabilities",
            "capability-ingress",
        );
        // v4.15 predates Ingress, so on 4.16 it must be added (and OLM for its marketplace is there).
        fails(
            caps("4.16", json!({"baseline_capability_set": "v4.15"})),
            "capabilities.additional_enabled_capabilities",
            "capability-ingress",
        );
        ok_plan(&caps(
            "4.16",
            json!({"baseline_capability_set": "v4.15", "additional_enabled_capabilities": ["Ingress"]}),
        ));
        // 4.15 has no Ingress capability: nothing to require.
        ok_plan(&caps(
            "4.15",
            json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["baremetal"]}),
        ));
    }

    /// installer `ValidateInstallConfig`: baseline None on platform baremetal needs baremetal.
    #[test]
    fn rule_capability_baremetal() {
        fails(
            caps(
                "4.16",
                json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress"]}),
            ),
            "capabilities.additional_enabled_capabilities",
            "capability-baremetal",
        );
        // SNO renders platform none: no baremetal capability needed.
        ok_plan(&with(
            sno(),
            "capabilities",
            json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress"]}),
        ));
    }

    /// installer `ValidateInstallConfig` (TestValidateInstallConfig "valid disabled CloudController
    /// configuration platform External", "… External 2", "invalid disabled CloudController
    /// configuration platform External 2"): on platform external CloudCredential stays enabled, and
    /// CloudControllerManager may be disabled only without the platform's own one.
    #[test]
    fn rule_capability_external() {
        let ext = |ccm: &str, extra: Value| {
            with(
                with(
                    with(sno(), "platform", json!("external")),
                    "external",
                    json!({"cloud_controller_manager": ccm}),
                ),
                "capabilities",
                json!({"baseline_capability_set": "None", "additional_enabled_capabilities": extra}),
            )
        };
        ok_plan(&ext("", json!(["CloudCredential", "Ingress"])));
        fails(
            ext("External", json!(["CloudCredential", "Ingress"])),
            "capabilities.additional_enabled_capabilities",
            "capability-cloud-controller-manager",
        );
        ok_plan(&ext(
            "External",
            json!(["CloudCredential", "CloudControllerManager", "Ingress"]),
        ));
        fails(
            ext("", json!(["Ingress"])),
            "capabilities.additional_enabled_capabilities",
            "capability-cloud-credential",
        );
    }

    /// installer `ValidateInstallConfig`: "the marketplace capability requires the
    /// OperatorLifecycleManager capability", on the enabled set, where OLM is a capability (4.15+).
    #[test]
    fn rule_capability_marketplace() {
        fails(
            caps(
                "4.16",
                json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress", "baremetal", "marketplace"]}),
            ),
            "capabilities.additional_enabled_capabilities",
            "capability-marketplace",
        );
        // v4.11 enables marketplace but not OLM (the installer's own test adds OLM to it).
        fails(
            caps(
                "4.16",
                json!({"baseline_capability_set": "v4.11", "additional_enabled_capabilities": ["Ingress"]}),
            ),
            "capabilities.additional_enabled_capabilities",
            "capability-marketplace",
        );
        ok_plan(&caps(
            "4.16",
            json!({"baseline_capability_set": "v4.11",
            "additional_enabled_capabilities": ["CloudCredential", "openshift-samples", "CloudControllerManager", "Ingress", "OperatorLifecycleManager"]}),
        ));
        // 4.14 has no OLM capability: marketplace stands alone.
        ok_plan(&caps("4.14", json!({"baseline_capability_set": "v4.11"})));
    }
}
