//! `capabilities`: known names only, and what baseline `None` still requires.

use crate::model::{CapabilitiesOpt, PlanCapabilities};

use super::context::{Ctx, Findings, Staged};

/// Known `capabilities.baselineCapabilitySet` values (InstallConfig CRD enum).
pub const BASELINE_SETS: &[&str] = &[
    "None", "v4.11", "v4.12", "v4.13", "v4.14", "v4.15", "v4.16", "v4.17", "v4.18", "vCurrent",
];
/// Known cluster capabilities (openshift/api `ClusterVersionCapability`).
pub const CAPABILITIES: &[&str] = &[
    "openshift-samples",
    "baremetal",
    "marketplace",
    "Console",
    "Insights",
    "Storage",
    "CSISnapshot",
    "NodeTuning",
    "MachineAPI",
    "Build",
    "DeploymentConfig",
    "ImageRegistry",
    "OperatorLifecycleManager",
    "OperatorLifecycleManager-v1",
    "CloudCredential",
    "Ingress",
    "CloudControllerManager",
];

pub(super) fn check(cx: &Ctx) -> Staged<Option<PlanCapabilities>> {
    let mut f = Findings::default();
    let caps =
        cx.o.capabilities
            .as_ref()
            .map(|cap| check_one(&mut f, cx, cap));
    f.with(caps)
}

fn check_one(f: &mut Findings, cx: &Ctx, cap: &CapabilitiesOpt) -> PlanCapabilities {
    let extra = cap
        .additional_enabled_capabilities
        .clone()
        .unwrap_or_default();
    for (i, name) in extra.iter().enumerate() {
        if !CAPABILITIES.contains(&name.as_str()) {
            f.err(
                format!("capabilities.additional_enabled_capabilities[{i}]"),
                "capability-known",
                format!(
                    "'{name}' is not a known capability ({})",
                    CAPABILITIES.join(", ")
                ),
            );
        }
    }
    if let Some(b) = &cap.baseline_capability_set {
        if !BASELINE_SETS.contains(&b.as_str()) {
            f.err(
                "capabilities.baseline_capability_set",
                "capability-known",
                format!(
                    "'{b}' is not a known baseline ({})",
                    BASELINE_SETS.join(", ")
                ),
            );
        }
        if b == "None" {
            baseline_none(f, cx, &extra);
        }
    }
    PlanCapabilities {
        baseline_capability_set: cap.baseline_capability_set.clone(),
        additional_enabled_capabilities: extra,
    }
}

/// With baseline `None` nothing is on unless listed, so what the cluster cannot run without
/// must be listed.
fn baseline_none(f: &mut Findings, cx: &Ctx, extra: &[String]) {
    let has = |n: &str| extra.iter().any(|x| x == n);
    if cx.minor >= 16 && !has("Ingress") {
        f.err(
            "capabilities.additional_enabled_capabilities",
            "capability-ingress",
            "the Ingress capability must be enabled",
        );
    }
    if cx.topo.platform == "baremetal" && !has("baremetal") {
        f.err(
            "capabilities.additional_enabled_capabilities",
            "capability-baremetal",
            "platform baremetal with baseline None requires the baremetal capability",
        );
    }
    if has("marketplace") && !has("OperatorLifecycleManager") {
        f.err(
            "capabilities.additional_enabled_capabilities",
            "capability-marketplace",
            "marketplace requires OperatorLifecycleManager",
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_capabilities() {
        fails(
            with(
                compact(),
                "capabilities",
                json!({"baseline_capability_set": "v9"}),
            ),
            "capabilities.baseline_capability_set",
            "capability-known",
        );
        fails(
            with(
                compact(),
                "capabilities",
                json!({"additional_enabled_capabilities": ["Consolee"]}),
            ),
            "capabilities.additional_enabled_capabilities[0]",
            "capability-known",
        );
        fails(
            with(
                compact(),
                "capabilities",
                json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["baremetal"]}),
            ),
            "capabilities.additional_enabled_capabilities",
            "capability-ingress",
        );
        fails(
            with(
                compact(),
                "capabilities",
                json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress"]}),
            ),
            "capabilities.additional_enabled_capabilities",
            "capability-baremetal",
        );
        fails(
            with(
                compact(),
                "capabilities",
                json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress", "baremetal", "marketplace"]}),
            ),
            "capabilities.additional_enabled_capabilities",
            "capability-marketplace",
        );
    }
}
