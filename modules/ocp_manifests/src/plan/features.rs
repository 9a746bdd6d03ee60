//! Install-time switches: `featureSet`/`featureGates` and `cpuPartitioningMode` (install-config),
//! `minimalISO` and `bootArtifactsBaseURL` (agent-config), with the installer's own rules.

use super::context::{Ctx, Findings, Staged};

/// openshift/api `config/v1` `FeatureSets` (Default is the empty string), as the installer's
/// `validateFeatureSet` (pkg/types/validation/installconfig.go) accepts them.
const FEATURE_SETS: &[&str] = &[
    "",
    "TechPreviewNoUpgrade",
    "DevPreviewNoUpgrade",
    "CustomNoUpgrade",
];
/// The InstallConfig CRD's enum for `cpuPartitioningMode`.
const CPU_PARTITIONING_MODES: &[&str] = &["None", "AllNodes"];

/// The validated switches, in the installer's terms.
#[derive(Debug, Clone, Default)]
pub(crate) struct Features {
    pub feature_set: Option<String>,
    pub feature_gates: Vec<String>,
    pub cpu_partitioning_mode: Option<String>,
    pub minimal_iso: bool,
    pub boot_artifacts_base_url: Option<String>,
}

pub(super) fn check(cx: &Ctx) -> Staged<Features> {
    let mut f = Findings::default();
    let o = cx.o;
    let set = o.feature_set.clone().unwrap_or_default();
    if !FEATURE_SETS.contains(&set.as_str()) {
        f.err(
            "feature_set",
            "feature-set-supported",
            format!(
                "'{set}' is not a feature set; supported: \"\" (default), {}",
                FEATURE_SETS[1..].join(", ")
            ),
        );
    } else if !set.is_empty() && agent_refuses_feature_sets(cx.minor) {
        f.err(
            "feature_set",
            "agent-feature-set",
            format!(
                "the agent installer of OpenShift {} refuses featureSet {set} (FeatureSet: Unsupported value, supported: \"\"): only the Default feature set installs through an agent ISO before 4.20; remove feature_set, or use 4.20 or later",
                cx.o.version
            ),
        );
    } else if !set.is_empty() {
        f.warn(format!(
            "feature_set: {set} cannot be undone and prevents upgrades of this cluster"
        ));
    }
    let gates = o.feature_gates.clone().unwrap_or_default();
    if !gates.is_empty() && set != "CustomNoUpgrade" {
        f.err(
            "feature_gates",
            "feature-gates-custom-only",
            "featureGates can only be used with the CustomNoUpgrade feature set",
        );
    }
    for (i, gate) in gates.iter().enumerate() {
        // validateCustomFeatureGates: exactly one '=', and a value Go's strconv.ParseBool reads.
        let at = format!("feature_gates[{i}]");
        match gate.split('=').collect::<Vec<_>>()[..] {
            [_, value] if go_parse_bool(value) => {}
            [_, _] => f.err(at, "feature-gate-format",
                            format!("'{gate}' must match the format <feature-name>=<bool>, could not parse boolean value")),
            _ => f.err(at, "feature-gate-format", format!("'{gate}' must match the format <feature-name>=<bool>")),
        }
    }
    let cpu = o.cpu_partitioning_mode.clone();
    if let Some(mode) = cpu
        .as_deref()
        .filter(|m| !CPU_PARTITIONING_MODES.contains(m))
    {
        f.err(
            "cpu_partitioning_mode",
            "cpu-partitioning-mode",
            format!("'{mode}' is not a CPU partitioning mode; supported: None, AllNodes"),
        );
    }
    let url = o.boot_artifacts_base_url.clone().filter(|u| !u.is_empty());
    if let Some(u) = url.as_deref().filter(|u| !is_absolute_uri(u)) {
        // The installer checks it with validate.URI: url.Parse succeeds and the URI has a scheme.
        f.err("boot_artifacts_base_url", "boot-artifacts-base-url",
              format!("'{u}' must be an absolute URL such as http://assets.example.com/agent (no scheme given, or not a URL)"));
    }
    f.with(Features {
        feature_set: Some(set).filter(|s| !s.is_empty()),
        feature_gates: gates,
        cpu_partitioning_mode: cpu,
        minimal_iso: o.minimal_iso,
        boot_artifacts_base_url: url,
    })
}

/// installer pkg/asset/agent `OptionalInstallConfig.validateInstallConfig`: from 4.16 through 4.19
/// the agent installer refuses any `featureSet` but Default (`field.NotSupported(FeatureSet, …,
/// [""])`); 4.20's drops that rule (its `validateInstallConfig` has no feature-set check), so a
/// non-Default set installs through the agent from 4.20 on. Before 4.16 this module follows the
/// generic rules (`validateFeatureSet`) alone.
pub(super) fn agent_refuses_feature_sets(minor: u32) -> bool {
    (16..=19).contains(&minor)
}

/// The spellings Go's `strconv.ParseBool` accepts.
fn go_parse_bool(s: &str) -> bool {
    matches!(
        s,
        "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false" | "False"
    )
}

/// An RFC 3986 scheme followed by ':' and no whitespace or control characters (which Go's url.Parse
/// refuses).
fn is_absolute_uri(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn feature_sets_the_installer_knows_are_accepted() {
        for set in [
            "",
            "TechPreviewNoUpgrade",
            "DevPreviewNoUpgrade",
            "CustomNoUpgrade",
        ] {
            let v = with(compact(), "version", json!("4.20"));
            let plan = ok_plan(&with(v, "feature_set", json!(set)));
            assert_eq!(
                plan.feature_set.as_deref(),
                Some(set).filter(|s| !s.is_empty())
            );
        }
    }

    #[test]
    fn rule_feature_set() {
        // validateFeatureSet: NotSupported for a name outside configv1.FeatureSets.
        fails(
            with(compact(), "feature_set", json!("TechPreview")),
            "feature_set",
            "feature-set-supported",
        );
        fails(
            with(compact(), "feature_set", json!("LatencySensitive")),
            "feature_set",
            "feature-set-supported",
        );
    }

    /// OptionalInstallConfig.validateInstallConfig: 4.16–4.19 agent installs take only Default.
    #[test]
    fn rule_agent_feature_set_per_version() {
        for version in ["4.16", "4.17", "4.18.3", "4.19"] {
            for set in [
                "TechPreviewNoUpgrade",
                "DevPreviewNoUpgrade",
                "CustomNoUpgrade",
            ] {
                let v = with(compact(), "version", json!(version));
                fails(
                    with(v, "feature_set", json!(set)),
                    "feature_set",
                    "agent-feature-set",
                );
            }
            let v = with(compact(), "version", json!(version));
            ok_plan(&with(v, "feature_set", json!("")));
        }
        for version in ["4.14", "4.15", "4.20", "4.21"] {
            let v = with(compact(), "version", json!(version));
            ok_plan(&with(v, "feature_set", json!("TechPreviewNoUpgrade")));
        }
    }

    #[test]
    fn rule_feature_gates() {
        // validateFeatureSet: featureGates are Forbidden unless the set is CustomNoUpgrade.
        let gates = json!(["GatewayAPI=true"]);
        fails(
            with(compact(), "feature_gates", gates.clone()),
            "feature_gates",
            "feature-gates-custom-only",
        );
        let custom = with(
            with(compact(), "version", json!("4.20")),
            "feature_set",
            json!("CustomNoUpgrade"),
        );
        let plan = ok_plan(&with(
            custom.clone(),
            "feature_gates",
            json!(["GatewayAPI=true", "Foo=F", "Bar=0"]),
        ));
        assert_eq!(plan.feature_gates, ["GatewayAPI=true", "Foo=F", "Bar=0"]);
        // validateCustomFeatureGates: <name>=<bool>, the bool as strconv.ParseBool reads it.
        fails(
            with(custom.clone(), "feature_gates", json!(["GatewayAPI"])),
            "feature_gates[0]",
            "feature-gate-format",
        );
        fails(
            with(custom.clone(), "feature_gates", json!(["a=b=true"])),
            "feature_gates[0]",
            "feature-gate-format",
        );
        fails(
            with(
                custom,
                "feature_gates",
                json!(["ok=true", "GatewayAPI=yes"]),
            ),
            "feature_gates[1]",
            "feature-gate-format",
        );
    }

    #[test]
    fn rule_cpu_partitioning_mode() {
        let plan = ok_plan(&with(compact(), "cpu_partitioning_mode", json!("AllNodes")));
        assert_eq!(plan.cpu_partitioning_mode.as_deref(), Some("AllNodes"));
        fails(
            with(compact(), "cpu_partitioning_mode", json!("all")),
            "cpu_partitioning_mode",
            "cpu-partitioning-mode",
        );
    }

    #[test]
    fn rule_boot_artifacts_base_url() {
        let v = with(
            compact(),
            "boot_artifacts_base_url",
            json!("http://10.0.0.5:8080/agent"),
        );
        let plan = ok_plan(&with(v, "minimal_iso", json!(true)));
        assert_eq!(
            plan.boot_artifacts_base_url.as_deref(),
            Some("http://10.0.0.5:8080/agent")
        );
        assert!(plan.minimal_iso);
        for bad in [
            "assets.example.com/agent",
            "//host/path",
            "http://host/a b",
            "1http://x",
        ] {
            fails(
                with(compact(), "boot_artifacts_base_url", json!(bad)),
                "boot_artifacts_base_url",
                "boot-artifacts-base-url",
            );
        }
    }
}
