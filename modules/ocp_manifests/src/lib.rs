//! `proxshift.openshift.ocp_manifests`: validate an inventory's cluster definition, render
//! `install-config.yaml` and `agent-config.yaml` for the agent-based installer, and optionally build
//! the agent ISO.
//!
//! Pure parts: [`plan`] (validation + topology + IP allocation), [`nmstate`], [`formats`], [`net`],
//! [`render`] and [`verify`]. I/O lives in [`files`], [`iso`] and [`run`].

pub mod files;
pub mod formats;
pub mod iso;
pub mod model;
pub mod net;
pub mod nmstate;
pub mod plan;
pub mod render;
pub mod verify;

#[cfg(test)]
mod schema;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use serde_json::{json, Value};

use crate::model::{Options, Plan};
use crate::plan::Problem;

/// The module's options; the sidecar `plugins/modules/ocp_manifests.yml` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    let hints = ArgSpec::new(vec![
        Opt::str("device_name").aliases(&["deviceName"]),
        Opt::str("wwn"),
        Opt::str("serial_number").aliases(&["serial", "serialNumber"]),
        Opt::str("hctl"),
        Opt::str("model"),
        Opt::str("vendor"),
        Opt::int("min_size_gigabytes").aliases(&["minSizeGigabytes"]),
        Opt::bool("rotational"),
    ]);
    let node = ArgSpec::new(vec![
        Opt::str("name").required(),
        Opt::str("role").choices(&["master", "worker"]),
        Opt::str("mac").required(),
        Opt::str("ip"),
        Opt::str("interface"),
        Opt::dict("root_device_hints").options(hints),
        Opt::dict("network_config"),
    ]);
    ArgSpec::new(vec![
        Opt::str("cluster_name").required(),
        Opt::str("base_domain").required(),
        Opt::str("version").required(),
        Opt::list("machine_networks", Type::Str)
            .required()
            .aliases(&["machine_network"]),
        Opt::list("cluster_networks", Type::Dict)
            .default(json!([{"cidr": "10.128.0.0/14", "host_prefix": 23}]))
            .options(ArgSpec::new(vec![
                Opt::str("cidr").required(),
                Opt::int("host_prefix").default(23),
            ])),
        Opt::list("service_networks", Type::Str).default(json!(["172.30.0.0/16"])),
        Opt::str("network_type").default("OVNKubernetes"),
        Opt::str("ovn_internal_join_subnet"),
        Opt::str("gateway"),
        Opt::list("dns_servers", Type::Str),
        Opt::list("ntp_servers", Type::Str),
        Opt::str("interface_name").default("ens18"),
        Opt::list("api_vips", Type::Str).aliases(&["api_vip"]),
        Opt::list("ingress_vips", Type::Str).aliases(&["ingress_vip"]),
        Opt::str("platform")
            .default("auto")
            .choices(&["auto", "baremetal", "none"]),
        Opt::str("load_balancer").choices(&["OpenShiftManagedDefault", "UserManaged"]),
        Opt::list("nodes", Type::Dict).required().options(node),
        Opt::dict("ip_pool").options(ArgSpec::new(vec![
            Opt::str("start").required(),
            Opt::str("end"),
        ])),
        Opt::str("rendezvous_ip"),
        Opt::new("pull_secret", Type::Json).required().no_log(),
        Opt::str("ssh_key"),
        Opt::str("additional_trust_bundle"),
        Opt::str("additional_trust_bundle_policy").choices(&["Proxyonly", "Always"]),
        Opt::dict("proxy").options(ArgSpec::new(vec![
            Opt::str("http_proxy"),
            Opt::str("https_proxy"),
            Opt::list("no_proxy", Type::Str),
        ])),
        Opt::list("image_digest_sources", Type::Dict).options(ArgSpec::new(vec![
            Opt::str("source").required(),
            Opt::list("mirrors", Type::Str).required(),
        ])),
        Opt::dict("capabilities").options(ArgSpec::new(vec![
            Opt::str("baseline_capability_set"),
            Opt::list("additional_enabled_capabilities", Type::Str),
        ])),
        Opt::bool("fips").default(false),
        Opt::path("output_dir").required(),
        Opt::path("template_dir"),
        Opt::bool("backup").default(true),
        Opt::path("openshift_install"),
        Opt::int("iso_max_age_hours").default(24),
    ])
}

fn problems_failure(what: &str, problems: &[Problem]) -> Failure {
    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
    Failure::new(format!("{} {what}: {}", problems.len(), list.join("; "))).with(
        "problems",
        Value::Array(
            problems
                .iter()
                .map(|p| json!({"path": p.path, "rule": p.rule, "msg": p.msg}))
                .collect(),
        ),
    )
}

/// `nmstatectl gc` on each host's networkConfig, when nmstatectl is installed (the installer runs
/// the same conversion on the build host). Returns whether the check ran.
pub(crate) fn nmstatectl_check(
    bin: Option<&Path>,
    plan: &Plan,
    tmp: &Path,
) -> Result<bool, Vec<Problem>> {
    let Some(bin) = bin else {
        return Ok(false);
    };
    let mut problems = Vec::new();
    for (i, h) in plan.hosts.iter().enumerate() {
        let file = tmp.join(format!(
            "ocp-manifests-nmstate-{}-{i}.yml",
            std::process::id()
        ));
        let text = serde_yaml_ng::to_string(&h.network_config).unwrap_or_default();
        if let Err(e) = files::write_atomic(&file, text.as_bytes()) {
            problems.push(Problem {
                path: format!("nodes[{i}].network_config"),
                rule: "nmstatectl-gc",
                msg: e,
            });
            continue;
        }
        let out = Command::new(bin).arg("gc").arg(&file).output();
        let _ = std::fs::remove_file(&file);
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr);
                let last = err
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("failed")
                    .trim()
                    .to_string();
                problems.push(Problem {
                    path: format!("nodes[{i}].network_config"),
                    rule: "nmstatectl-gc",
                    msg: format!("nmstatectl gc rejected it: {last}"),
                });
            }
            Err(e) => problems.push(Problem {
                path: format!("nodes[{i}].network_config"),
                rule: "nmstatectl-gc",
                msg: format!("cannot run nmstatectl: {e}"),
            }),
        }
    }
    if problems.is_empty() {
        Ok(true)
    } else {
        Err(problems)
    }
}

/// Validate, render, verify, write, and (optionally) build the ISO.
pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    // The rendered form of the pull secret is JSON-escaped; mask that too.
    let escaped = serde_json::to_string(&o.pull_secret).unwrap_or_default();
    m.add_secret(escaped.trim_matches('"').to_string());

    let planned = plan::plan(&o);
    for s in &planned.secrets {
        m.add_secret(s.clone());
    }
    for w in &planned.warnings {
        m.warn(w.clone());
    }
    let Some(plan) = planned.plan else {
        return Err(problems_failure("validation errors", &planned.problems));
    };
    let nmstatectl = iso::resolve_binary("nmstatectl").ok();
    let nmstatectl_checked = nmstatectl_check(nmstatectl.as_deref(), &plan, &m.tmpdir())
        .map_err(|p| problems_failure("nmstate errors", &p))?;
    let (install_config, agent_config) = render::render(&plan, o.template_dir.as_deref())
        .map_err(|e| Failure::new(e.to_string()))?;
    let problems = verify::verify(&plan, &install_config, &agent_config);
    if !problems.is_empty() {
        return Err(problems_failure(
            "problems in the rendered files",
            &problems,
        ));
    }

    let out_dir = &o.output_dir;
    let ic_path = out_dir.join(render::INSTALL_CONFIG);
    let ac_path = out_dir.join(render::AGENT_CONFIG);
    let mut diff_secrets = vec![o.pull_secret.clone(), escaped.trim_matches('"').to_string()];
    diff_secrets.extend(planned.secrets.iter().cloned());
    let mut pending = Vec::new();
    for (path, content) in [(&ic_path, &install_config), (&ac_path, &agent_config)] {
        let p = files::inspect(path, content).map_err(Failure::new)?;
        if p.content_changes {
            let before = p
                .before
                .as_deref()
                .map(|b| files::mask_for_diff(b, &diff_secrets))
                .unwrap_or_default();
            let header = path.display().to_string();
            m.add_diff(
                json!(before),
                json!(files::mask_for_diff(content, &diff_secrets)),
                &header,
                &header,
            );
        }
        pending.push((p, content));
    }
    let files_changed = pending.iter().any(|(p, _)| p.changed());
    let mut backups = Vec::new();
    if files_changed && !m.check_mode {
        if !out_dir.is_dir() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(out_dir)
                .map_err(|e| Failure::new(format!("output_dir {}: {e}", out_dir.display())))?;
        }
        for (p, content) in &pending {
            if p.changed() {
                if let Some(b) = files::apply(p, content, o.backup)
                    .map_err(|e| Failure::new(e).changed(!backups.is_empty()))?
                {
                    backups.push(b);
                }
            }
        }
    }

    let mut outcome = Outcome::new(files_changed)
        .with("output_dir", json!(out_dir))
        .with("install_config_path", json!(ic_path))
        .with("agent_config_path", json!(ac_path))
        .with("backups", json!(backups))
        .with("topology", plan.topology.as_str())
        .with("platform", plan.platform.clone())
        .with("control_plane_replicas", plan.control_plane_replicas)
        .with("compute_replicas", plan.compute_replicas)
        .with("rendezvous_ip", plan.rendezvous_ip.clone())
        .with("api_vips", json!(plan.api_vips))
        .with("ingress_vips", json!(plan.ingress_vips))
        .with("nmstatectl_checked", nmstatectl_checked)
        .with(
            "nodes",
            Value::Array(
                plan.hosts
                    .iter()
                    .map(|h| json!({"name": h.name, "role": h.role, "ip": h.ip, "mac": h.mac, "interface": h.interface}))
                    .collect(),
            ),
        );

    let mut msg = format!(
        "{} {} cluster {}.{}: {}",
        if files_changed {
            if m.check_mode {
                "would render"
            } else {
                "rendered"
            }
        } else {
            "unchanged"
        },
        plan.topology.as_str().to_uppercase(),
        plan.cluster_name,
        plan.base_domain,
        if files_changed {
            "manifests changed"
        } else {
            "manifests up to date"
        }
    );
    if let Some(bin_name) = &o.openshift_install {
        let bin = iso::resolve_binary(bin_name)
            .map_err(|e| Failure::new(e).changed(files_changed && !m.check_mode))?;
        let current = iso::Artifacts::in_dir(&out_dir.join(iso::BUILD_DIR));
        let max_age = Duration::from_secs(o.iso_max_age_hours.saturating_mul(3600));
        let reuse = if files_changed {
            Err("the manifests changed".to_string())
        } else {
            iso::reusable(
                &current,
                &[ic_path.clone(), ac_path.clone()],
                max_age,
                SystemTime::now(),
            )
        };
        let (artifacts, built, needed, reason, note) = match reuse {
            Ok(why) => (
                current,
                false,
                false,
                format!("kept: {why}"),
                "agent ISO up to date",
            ),
            Err(why) if m.check_mode => (
                current,
                false,
                true,
                format!("would build: {why}"),
                "would build the agent ISO",
            ),
            Err(why) => {
                let built = iso::build(&bin, out_dir, &[ic_path.clone(), ac_path.clone()])
                    .map_err(|e| {
                        Failure::new(e.msg)
                            .changed(files_changed)
                            .with("installer_log_tail", json!(e.log_tail))
                            .with("installer_dir", json!(e.work_dir))
                    })?;
                (
                    built,
                    true,
                    true,
                    format!("built: {why}"),
                    "built the agent ISO",
                )
            }
        };
        // Building (or, in check mode, needing to build) the ISO is a change.
        outcome.changed |= needed;
        outcome = outcome.with("iso_built", built).with("iso_reason", reason);
        for (k, v) in artifacts.to_json().as_object().into_iter().flatten() {
            outcome = outcome.with(k, v.clone());
        }
        msg.push_str(&format!("; {note}"));
    }
    Ok(outcome.msg(msg))
}
