//! `proxshift.openshift.ocp_manifests`: validate an inventory's cluster definition, render
//! `install-config.yaml` and `agent-config.yaml` for the agent-based installer, and optionally build
//! the agent ISO.
//!
//! Pure parts: [`plan`] (validation + topology + IP allocation), [`nmstate`], [`formats`], [`net`],
//! [`render`] and [`verify`]. I/O lives in [`files`], [`iso`] and [`run`].

pub mod extra;
pub mod files;
pub mod formats;
pub mod installer;
pub mod iso;
pub mod model;
pub mod net;
pub mod nmstate;
pub mod plan;
pub mod release;
pub mod render;
pub mod verify;

#[cfg(test)]
mod corpus;
#[cfg(test)]
mod schema;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::time::{Duration, SystemTime};

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use serde_json::{json, Value};

use crate::model::{Options, Plan};
use crate::plan::Problem;

/// The module's options; the documentation stub `plugins/modules/ocp_manifests.py` documents exactly these.
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
        Opt::str("role").choices(&["master", "arbiter", "worker"]),
        Opt::str("mac").required(),
        Opt::str("ip"),
        Opt::str("secondary_ip"),
        Opt::str("interface"),
        Opt::bool("dhcp"),
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
        Opt::str("secondary_gateway"),
        Opt::list("dns_servers", Type::Str),
        Opt::list("ntp_servers", Type::Str),
        Opt::str("interface_name").default("ens18"),
        Opt::bool("dhcp").default(false),
        Opt::list("api_vips", Type::Str).aliases(&["api_vip"]),
        Opt::list("ingress_vips", Type::Str).aliases(&["ingress_vip"]),
        Opt::str("platform")
            .default("auto")
            .choices(&["auto", "baremetal", "none", "external"]),
        Opt::dict("external").options(ArgSpec::new(vec![
            Opt::str("platform_name").default("Unknown"),
            Opt::str("cloud_controller_manager").choices(&["", "External"]),
        ])),
        Opt::str("load_balancer").choices(&["OpenShiftManagedDefault", "UserManaged"]),
        Opt::list("nodes", Type::Dict).required().options(node),
        Opt::dict("ip_pool").options(ArgSpec::new(vec![
            Opt::str("start").required(),
            Opt::str("end"),
        ])),
        Opt::str("rendezvous_ip"),
        Opt::new("pull_secret", Type::Json).no_log(),
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
        Opt::str("feature_set"),
        Opt::list("feature_gates", Type::Str),
        Opt::str("cpu_partitioning_mode"),
        Opt::bool("minimal_iso").default(false),
        Opt::str("boot_artifacts_base_url"),
        Opt::list("extra_manifests", Type::Path),
        Opt::path("output_dir").required(),
        Opt::path("template_dir"),
        Opt::bool("backup").default(true),
        Opt::path("openshift_install"),
        Opt::dict("openshift_installers"),
        Opt::path("openshift_install_cache"),
        Opt::bool("installer_required").default(false),
        Opt::str("release_image"),
        Opt::str("oc_binary").default("oc"),
        Opt::bool("installer_only").default(false),
        Opt::bool("build_iso").default(true),
        Opt::int("iso_max_age_hours").default(24),
        Opt::bool("keep_build").default(false),
    ])
    // Choosing the installer alone needs the pull secret only to extract one.
    .required_if("installer_only", false, &["pull_secret"])
}

/// The clusters' CPU architecture: what `templates/install-config.yaml.j2` renders, and so the release
/// image an installer is extracted from (`-x86_64`).
const CLUSTER_ARCHITECTURE: &str = "amd64";

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

/// The host's entry of `oc adm node-image create`'s nodes-config.yaml (the installer's day-2 flow):
/// agent-config's host fields without `role` (added nodes are workers).
fn nodes_config_host(h: &model::PlanHost) -> Value {
    let mut v = json!({
        "hostname": h.name,
        "interfaces": h.interfaces.iter().map(|i| json!({"name": i.name, "macAddress": i.mac})).collect::<Vec<_>>(),
        "networkConfig": h.network_config,
    });
    if h.network_config.is_null() {
        v.as_object_mut().map(|o| o.remove("networkConfig")); // a DHCP host
    }
    if let Some(r) = &h.root_device_hints {
        v["rootDeviceHints"] = r.clone();
    }
    v
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
        if h.network_config.is_null() {
            continue; // DHCP: no networkConfig for the installer to run nmstatectl on.
        }
        let file = tmp.join(format!(
            "ocp-manifests-nmstate-{}-{i}.yml",
            std::process::id()
        ));
        let text = serde_yaml_ng::to_string(&h.network_config).unwrap_or_default();
        if let Err(e) = files::write_atomic(&file, text.as_bytes()) {
            problems.push(Problem {
                path: format!("nodes[{i}].network_config"),
                rule: "nmstatectl-gc",
                msg: e.to_string(),
            });
            continue;
        }
        // `--`: clap ends the options there, so the file is a file whatever its name.
        let out = ansible_module::child::command(bin)
            .args(["gc", "--"])
            .arg(&file)
            .output();
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
    if o.installer_only {
        return installer_only(m, &o);
    }

    // Chosen before anything is rendered; its problem is listed with the validation problems.
    let installer = choose_installer(&o);
    let planned = plan::plan(&o);
    for s in &planned.secrets {
        m.add_secret(s.clone());
    }
    for w in &planned.warnings {
        m.warn(w.clone());
    }
    let Some(plan) = planned.plan else {
        return Err(validation_failure(&planned.problems, &installer));
    };
    let installer = installer.map_err(|e| installer_failure(&e))?;
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
    // Only for a cluster whose files are valid: an extraction downloads the release's installer.
    let (installer, extracted) = obtain(installer, &o, m)?;

    let out_dir = &o.output_dir;
    let extra = extra_manifests(&o)?;
    let ic_path = out_dir.join(render::INSTALL_CONFIG);
    let ac_path = out_dir.join(render::AGENT_CONFIG);
    let mut diff_secrets = vec![o.pull_secret.clone(), escaped.trim_matches('"').to_string()];
    diff_secrets.extend(planned.secrets.iter().cloned());
    let mut pending = Vec::new();
    let outputs = [
        (ic_path.clone(), &install_config),
        (ac_path.clone(), &agent_config),
    ]
    .into_iter()
    .chain(extra.iter().map(|(p, c)| (p.clone(), c)));
    for (path, content) in outputs {
        let path = &path;
        let p = files::inspect(path, content).map_err(|e| Failure::new(e.to_string()))?;
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
    // The VMs booted from the current build: a changed input is reported, never applied, and the
    // files stay as that build was made from (`held_changes` says what would change).
    let held = if o.keep_build {
        held_changes(&pending)
    } else {
        Vec::new()
    };
    if !held.is_empty() {
        m.warn(held_message(&held));
        pending.clear();
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
        let extra_dir = out_dir.join(extra::DIR);
        if !extra.is_empty() && !extra_dir.is_dir() {
            std::fs::create_dir(&extra_dir)
                .map_err(|e| Failure::new(format!("{}: {e}", extra_dir.display())))?;
        }
        for (p, content) in &pending {
            if p.changed() {
                if let Some(b) = files::apply(p, content, o.backup)
                    .map_err(|e| Failure::new(e.to_string()).changed(!backups.is_empty()))?
                {
                    backups.push(b);
                }
            }
        }
    }

    let mut outcome = Outcome::new(files_changed || extracted)
        .with("output_dir", json!(out_dir))
        .with("install_config_path", json!(ic_path))
        .with("agent_config_path", json!(ac_path))
        .with(
            "extra_manifest_paths",
            json!(extra.iter().map(|(p, _)| p).collect::<Vec<_>>()),
        )
        .with("backups", json!(backups))
        .with("held_changes", json!(held))
        .with("topology", plan.topology.as_str())
        .with("platform", plan.platform.clone())
        .with("control_plane_replicas", plan.control_plane_replicas)
        .with("arbiter_replicas", plan.arbiter_replicas)
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
                    .map(|h| json!({"name": h.name, "role": h.role, "ip": h.ip, "secondary_ip": h.secondary_ip, "mac": h.mac, "interface": h.interface,
                        "nodes_config": nodes_config_host(h)}))
                    .collect(),
            ),
        );

    let mut msg = summary(&plan, files_changed, m.check_mode);
    if o.keep_build {
        // Kept whatever its age or inputs: rebuilding would orphan the VMs that booted from it.
        let current = iso::Artifacts::in_dir(&out_dir.join(iso::BUILD_DIR));
        outcome = with_iso(
            outcome,
            &current,
            false,
            "kept: the VMs booted from this build (keep_build)",
        );
        msg.push_str("; agent ISO kept (the VMs booted from it)");
        if !held.is_empty() {
            msg.push_str("; input changes held back, see the warning");
        }
    } else if let (Installer::Ready { choice, .. }, true) = (&installer, o.build_iso) {
        let mut inputs = vec![ic_path.clone(), ac_path.clone()];
        inputs.extend(extra.iter().map(|(p, _)| p.clone()));
        let (o2, note) = iso_step(
            m.check_mode,
            &choice.path,
            &o,
            &inputs,
            files_changed,
            outcome,
        )?;
        outcome = o2;
        msg.push_str(&format!("; {note}"));
    }
    let outcome = with_installer(outcome, &installer, o.build_iso && !o.keep_build, &mut msg);
    Ok(outcome.msg(msg))
}

/// The extra manifests, read and checked (every problem at once): each one's place under
/// `output_dir/openshift/` and its text.
fn extra_manifests(o: &Options) -> Result<Vec<(std::path::PathBuf, String)>, Failure> {
    let mut out: Vec<(std::path::PathBuf, String)> = Vec::new();
    let mut problems = Vec::new();
    for (i, src) in o.extra_manifests.iter().flatten().enumerate() {
        let text = match std::fs::read_to_string(src) {
            Ok(t) => t,
            Err(e) => {
                problems.push(Problem {
                    path: format!("extra_manifests[{i}]"),
                    rule: "extra-manifest-readable",
                    msg: format!("{}: {e}", src.display()),
                });
                continue;
            }
        };
        let (name, found) = extra::check(i, &src.display().to_string(), &text);
        problems.extend(found);
        let dest = o.output_dir.join(extra::DIR).join(&name);
        if out.iter().any(|(d, _)| *d == dest) {
            problems.push(Problem {
                path: format!("extra_manifests[{i}]"),
                rule: "extra-manifest-unique",
                msg: format!("another extra manifest is also named {name}"),
            });
        }
        out.push((dest, text));
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems_failure("problems in extra_manifests", &problems))
    }
}

/// The cluster's installer: none asked for (no installer option given), missing (none found and
/// `installer_required` false: no ISO is built), to be extracted from the release image (check mode
/// reports it so), or found and of the cluster's version.
enum Installer {
    NotAsked,
    Missing(installer::InstallerError),
    Extract(release::Extraction),
    Ready {
        choice: installer::Choice,
        version: String,
    },
}

/// The chosen installer's facts, or why there is none (and no ISO, when one was to be built).
fn with_installer(
    mut outcome: Outcome,
    i: &Installer,
    building: bool,
    msg: &mut String,
) -> Outcome {
    match i {
        Installer::Ready { choice, version } => {
            // openshift-install runs oc to extract the base ISO from the release payload.
            let oc = iso::oc_for(&choice.path).map(|p| p.display().to_string());
            outcome = outcome
                .with("installer_path", json!(choice.path))
                .with("oc_path", oc.unwrap_or_default())
                .with("installer_version", version.clone())
                .with("installer_source", choice.source.describe());
            if let installer::Source::Release(image) = &choice.source {
                outcome = outcome.with("installer_release_image", image.clone());
                msg.push_str(&format!("; extracted openshift-install from {image}"));
            }
        }
        Installer::Extract(x) => {
            outcome = outcome
                .with("installer_path", json!(x.dest()))
                .with(
                    "installer_source",
                    installer::Source::Release(x.image.clone()).describe(),
                )
                .with("installer_release_image", x.image.clone());
            msg.push_str(&format!(
                "; would extract openshift-install from {} with {}",
                x.image,
                x.oc.display()
            ));
        }
        Installer::Missing(e) => {
            outcome = outcome
                .with("installer_missing", e.to_string())
                .with("installer_looked_in", json!(e.looked()));
            if building {
                msg.push_str(&format!("; agent ISO not built: {e}"));
            }
        }
        Installer::NotAsked => {}
    }
    outcome
}

fn choose_installer(o: &Options) -> Result<Installer, installer::InstallerError> {
    use installer::{InstallerError, Source};
    let sources = installer::Sources {
        map: o.openshift_installers.as_ref(),
        cache: o.openshift_install_cache.as_deref(),
        global: o.openshift_install.as_deref(),
    };
    if !sources.any() {
        return Ok(Installer::NotAsked);
    }
    let miss = match installer::select(&o.version, &sources) {
        Ok(choice) => match installer::verify(&choice.path, &o.version) {
            Ok(version) => return Ok(Installer::Ready { choice, version }),
            // The site's one installer is of another release: the cluster's own may be extracted.
            Err(e @ InstallerError::Mismatch { .. }) if choice.source == Source::Global => e,
            Err(e) => return Err(e),
        },
        Err(e @ InstallerError::NotFound { .. }) => e,
        Err(e) => return Err(e),
    };
    let inputs = release::Inputs {
        version: &o.version,
        arch: CLUSTER_ARCHITECTURE,
        image: o.release_image.as_deref(),
        oc: &o.oc_binary,
        cache: o.openshift_install_cache.as_deref(),
        pull_secret: &o.pull_secret,
    };
    match release::plan(&inputs) {
        Ok(x) => Ok(Installer::Extract(x)),
        Err(why) => match miss.not_extracted(why.to_string()) {
            e @ InstallerError::NotFound { .. } if !o.installer_required => {
                Ok(Installer::Missing(e))
            }
            e => Err(e),
        },
    }
}

/// Extract the release's installer when that is how the cluster gets one, and check its version; in
/// check mode it stays a plan. Whether the cache changed.
fn obtain(i: Installer, o: &Options, m: &Module) -> Result<(Installer, bool), Failure> {
    let Installer::Extract(x) = i else {
        return Ok((i, false));
    };
    if m.check_mode {
        return Ok((Installer::Extract(x), true));
    }
    let got =
        release::extract(&x, &o.pull_secret, &m.tmpdir()).map_err(|e| installer_failure(&e))?;
    let choice = installer::Choice {
        path: got.path,
        source: installer::Source::Release(x.image),
    };
    let ready = Installer::Ready {
        choice,
        version: got.version,
    };
    Ok((ready, got.fresh))
}

/// `installer_only`: the cluster's installer chosen (and extracted when needed), nothing rendered. A
/// run of the install phase alone resolves it so, to wait with the installer of the cluster's version.
fn installer_only(m: &Module, o: &Options) -> Result<Outcome, Failure> {
    let installer = choose_installer(o).map_err(|e| installer_failure(&e))?;
    let (installer, changed) = obtain(installer, o, m)?;
    let mut msg = match &installer {
        Installer::Ready { choice, version } => {
            format!("openshift-install {version} at {}", choice.path.display())
        }
        Installer::Extract(_) => "no installer of this version yet".to_string(),
        Installer::Missing(_) => "no installer of this version".to_string(),
        Installer::NotAsked => "no installer asked for".to_string(),
    };
    let outcome = with_installer(Outcome::new(changed), &installer, false, &mut msg);
    if let Installer::Missing(e) = &installer {
        msg.push_str(&format!(": {e}"));
    }
    Ok(outcome.msg(msg))
}

fn installer_problem(e: &installer::InstallerError) -> Problem {
    let rule = match e {
        installer::InstallerError::NotFound { .. } => "installer-missing",
        installer::InstallerError::Mismatch { .. } => "installer-version",
        installer::InstallerError::Extract(_) => "installer-extract",
        _ => "installer-unusable",
    };
    Problem {
        path: "openshift_install".to_string(),
        rule,
        msg: e.to_string(),
    }
}

/// Invalid options: every problem, the installer's among them.
fn validation_failure(
    problems: &[Problem],
    installer: &Result<Installer, installer::InstallerError>,
) -> Failure {
    let mut problems = problems.to_vec();
    let looked = match installer {
        Err(e) => {
            problems.push(installer_problem(e));
            e.looked().to_vec()
        }
        Ok(Installer::Missing(e)) => e.looked().to_vec(),
        Ok(_) => Vec::new(),
    };
    problems_failure("validation errors", &problems).with("installer_looked_in", json!(looked))
}

/// The cluster cannot use its installer: nothing was rendered, written or built.
fn installer_failure(e: &installer::InstallerError) -> Failure {
    problems_failure("installer problem", &[installer_problem(e)])
        .with("installer_problem", e.to_string())
        .with("installer_looked_in", json!(e.looked()))
}

/// The first part of the result message: what happened to the manifests.
fn summary(plan: &Plan, files_changed: bool, check_mode: bool) -> String {
    let (verb, what) = match (files_changed, check_mode) {
        (true, true) => ("would render", "manifests changed"),
        (true, false) => ("rendered", "manifests changed"),
        (false, _) => ("unchanged", "manifests up to date"),
    };
    format!(
        "{verb} {} cluster {}.{}: {what}",
        plan.topology.as_str().to_uppercase(),
        plan.cluster_name,
        plan.base_domain
    )
}

/// Add the build folder's paths and facts (ISO sha256, cluster ID) to the result.
fn with_iso(mut outcome: Outcome, a: &iso::Artifacts, built: bool, reason: &str) -> Outcome {
    outcome = outcome.with("iso_built", built).with("iso_reason", reason);
    for (k, v) in a.to_json().as_object().into_iter().flatten() {
        outcome = outcome.with(k, v.clone());
    }
    outcome
}

/// Keep the current ISO when it is still good, else build one (in check mode: say it would).
fn iso_step(
    check_mode: bool,
    bin: &Path,
    o: &Options,
    inputs: &[std::path::PathBuf],
    files_changed: bool,
    mut outcome: Outcome,
) -> Result<(Outcome, &'static str), Failure> {
    let out_dir = &o.output_dir;
    let current = iso::Artifacts::in_dir(&out_dir.join(iso::BUILD_DIR));
    let max_age = Duration::from_secs(o.iso_max_age_hours.saturating_mul(3600));
    let reuse = if files_changed {
        Err(iso::Stale::ManifestsChanged)
    } else {
        iso::reusable(&current, inputs, max_age, SystemTime::now())
    };
    let why = match reuse {
        Ok(why) => {
            let reason = format!("kept: {why}");
            return Ok((
                with_iso(outcome, &current, false, &reason),
                "agent ISO up to date",
            ));
        }
        Err(why) => why,
    };
    // Building (or, in check mode, needing to build) the ISO is a change.
    outcome.changed = true;
    if check_mode {
        let reason = format!("would build: {why}");
        return Ok((
            with_iso(outcome, &current, false, &reason),
            "would build the agent ISO",
        ));
    }
    let built = iso::build(bin, out_dir, inputs).map_err(|e| {
        Failure::new(e.to_string())
            .changed(files_changed)
            .with("installer_log_tail", json!(e.log_tail))
            .with("installer_dir", json!(e.work_dir))
    })?;
    let outcome = with_iso(outcome, &built.artifacts, true, &format!("built: {why}"))
        .with("archived", json!(built.archived));
    Ok((outcome, "built the agent ISO"))
}

/// What a kept build's inputs would change: per file, the YAML paths that differ (no values).
fn held_changes(pending: &[(files::Pending, &String)]) -> Vec<Value> {
    pending
        .iter()
        .filter(|(p, _)| p.content_changes)
        .map(|(p, content)| {
            let before = p.before.as_deref().unwrap_or_default();
            let file = p.path.file_name().map(|n| n.to_string_lossy().to_string());
            json!({"file": file, "paths": files::changed_paths(before, content, 20)})
        })
        .collect()
}

fn held_message(held: &[Value]) -> String {
    let list: Vec<String> = held
        .iter()
        .map(|h| {
            let paths: Vec<&str> = h["paths"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "{} ({})",
                h["file"].as_str().unwrap_or("?"),
                paths.join(", ")
            )
        })
        .collect();
    format!(
        "the cluster's VMs booted from the current agent ISO, so changed manifests inputs are not applied \
         and no ISO is built: {}. Nothing was changed; to reinstall the cluster with them, rerun with \
         -e force_install=true (this deletes the cluster's VMs).",
        list.join("; ")
    )
}
