//! Module-level tests: golden files, the CRD schema check and the whole module run (check mode,
//! idempotence, diff masking, ISO via the installer test double). The per-rule tests live next to
//! their rule, in the `plan/` stage files.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::formats::tests::TEST_CERT;
use crate::plan::fixtures::*;

// --- golden files, schema, parse-back -----------------------------------------------------------

fn golden_cases() -> Vec<(&'static str, Value)> {
    let mut sno = sno();
    sno["ntp_servers"] = json!(["ntp.example.com", "192.168.50.2"]);
    sno["nodes"][0]["root_device_hints"] = json!({"wwn": "0x5000c500a0b1c2d3"});
    sno["version"] = json!("4.18");

    let mut compact = compact();
    for n in compact["nodes"].as_array_mut().unwrap() {
        n.as_object_mut().unwrap().remove("ip");
    }
    compact["ip_pool"] = json!({"start": "192.168.50.10"});
    compact["image_digest_sources"] = json!([
        {"source": "quay.io/openshift-release-dev/ocp-release", "mirrors": ["mirror.lab.example.com:5000/ocp4/openshift-release-dev"]},
        {"source": "quay.io/openshift-release-dev/ocp-v4.0-art-dev", "mirrors": ["mirror.lab.example.com:5000/ocp4/openshift-release-dev"]},
    ]);
    compact["additional_trust_bundle"] = json!(TEST_CERT);
    compact["additional_trust_bundle_policy"] = json!("Always");
    compact["nodes"][0]["root_device_hints"] = json!({"device_name": "/dev/sda"});

    let mut ha = ha();
    ha["proxy"] = json!({"http_proxy": "http://proxy.example.com:3128", "https_proxy": "http://proxy.example.com:3128",
                         "no_proxy": [".example.com", "192.168.50.0/24"]});
    ha["additional_trust_bundle"] = json!(TEST_CERT);
    ha["image_digest_sources"] = json!([{"source": "quay.io/openshift-release-dev/ocp-release", "mirrors": ["mirror.lab.example.com:5000/ocp4/release"]}]);
    ha["capabilities"] = json!({"baseline_capability_set": "vCurrent", "additional_enabled_capabilities": ["baremetal"]});
    ha["cluster_networks"] = json!([{"cidr": "10.128.0.0/14", "host_prefix": 23}]);
    // The inventory's spelling (`serial`) is an alias of serial_number.
    ha["nodes"][3]["root_device_hints"] = json!({"serial": "drive-scsi0"});
    // Single-stack IPv6 and dual stack (IPv4 primary, VIP pairs) render end to end.
    let ipv6_sno = ipv6_only(sno.clone());
    vec![
        ("sno", sno),
        ("compact", compact),
        ("ha", ha),
        ("ipv6-sno", ipv6_sno),
        ("dual-stack", dual_stack()),
    ]
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[test]
fn golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let schema = crate::schema::crd_schema();
    for (name, v) in golden_cases() {
        let plan = ok_plan(&v);
        let (ic, ac) = crate::render::render(&plan, None).unwrap();
        assert_eq!(crate::verify::verify(&plan, &ic, &ac), vec![], "{name}");
        // The install-config satisfies the upstream CRD (types, enums, required, no unknown fields).
        let doc: Value = serde_yaml_ng::from_str(&ic).unwrap();
        assert_eq!(
            crate::schema::validate(&schema, &doc),
            Vec::<String>::new(),
            "{name} install-config vs CRD"
        );
        // Secrets survive quoting exactly.
        assert_eq!(doc["pullSecret"], json!(PULL_SECRET));
        for (file, text) in [("install-config.yaml", &ic), ("agent-config.yaml", &ac)] {
            let path = golden_dir().join(name).join(file);
            if update {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, text).unwrap();
            } else {
                let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                    panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display())
                });
                assert_eq!(
                    text,
                    &want,
                    "{} differs from the golden file",
                    path.display()
                );
            }
        }
        // Deterministic: a second render is byte-identical.
        assert_eq!(crate::render::render(&plan, None).unwrap(), (ic, ac));
    }
}

#[test]
fn every_topology_with_every_option_passes_the_crd() {
    let schema = crate::schema::crd_schema();
    for (_, mut v) in golden_cases() {
        v["fips"] = json!(true);
        v["ssh_key"] = json!(null);
        v["load_balancer"] = json!("UserManaged");
        v["ovn_internal_join_subnet"] = json!("100.66.0.0/16");
        v["capabilities"] = json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress", "baremetal"]});
        let plan = ok_plan(&v);
        let (ic, _) = crate::render::render(&plan, None).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&ic).unwrap();
        assert_eq!(crate::schema::validate(&schema, &doc), Vec::<String>::new());
    }
    // Platform external, with and without its settings (the CRD's enum for cloudControllerManager).
    for ext in [
        json!(null),
        json!({"platform_name": "oci", "cloud_controller_manager": "External"}),
    ] {
        let v = with(with(sno(), "platform", json!("external")), "external", ext);
        let (ic, _) = crate::render::render(&ok_plan(&v), None).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&ic).unwrap();
        assert_eq!(crate::schema::validate(&schema, &doc), Vec::<String>::new());
    }
}

#[test]
fn parse_back_catches_bad_user_templates() {
    let plan = ok_plan(&compact());
    let dir = std::env::temp_dir().join(format!("ocp-tpl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The original template's bug: single-quoted JSON breaks on a quote inside the secret.
    let builtin = include_str!("../templates/install-config.yaml.j2");
    let buggy = builtin.replace(
        "pullSecret: {{ pull_secret | yaml }}",
        "pullSecret: '{{ pull_secret }}'",
    );
    std::fs::write(dir.join("install-config.yaml.j2"), &buggy).unwrap();
    let (ic, ac) = crate::render::render(&plan, Some(&dir)).unwrap();
    let p = crate::verify::verify(&plan, &ic, &ac);
    assert!(
        p.iter()
            .any(|x| x.rule == "rendered-yaml-parses" || x.rule == "rendered-matches-input"),
        "{p:#?}"
    );
    assert!(!format!("{p:?}").contains("cGVsbC1zZWNyZXQ"));
    // Unknown fields (the original's rootVolume) and agent-config typos are caught too.
    let extra = builtin.replace(
        "  replicas: {{ control_plane_replicas }}",
        "  replicas: {{ control_plane_replicas }}\nrootVolume: {}",
    );
    std::fs::write(dir.join("install-config.yaml.j2"), &extra).unwrap();
    let agent =
        include_str!("../templates/agent-config.yaml.j2").replace("rendezvousIP:", "rendevousIP:");
    std::fs::write(dir.join("agent-config.yaml.j2"), agent).unwrap();
    let (ic, ac) = crate::render::render(&plan, Some(&dir)).unwrap();
    let rules: Vec<&str> = crate::verify::verify(&plan, &ic, &ac)
        .iter()
        .map(|x| x.rule)
        .collect::<Vec<_>>();
    assert!(rules.contains(&"rendered-known-fields"), "{rules:?}");
    assert!(rules.contains(&"agent-config-strict-keys"), "{rules:?}");
    let old_api = include_str!("../templates/agent-config.yaml.j2").replace("v1beta1", "v1beta9");
    std::fs::write(dir.join("agent-config.yaml.j2"), old_api).unwrap();
    let (ic, ac) = crate::render::render(&plan, Some(&dir)).unwrap();
    let rules: Vec<&str> = crate::verify::verify(&plan, &ic, &ac)
        .iter()
        .map(|x| x.rule)
        .collect();
    assert!(rules.contains(&"agent-config-api-version"), "{rules:?}");
    // A template referring to an undefined variable fails instead of rendering an empty value.
    std::fs::write(
        dir.join("agent-config.yaml.j2"),
        "x: {{ no_such_thing | yaml }}\n",
    )
    .unwrap();
    assert!(crate::render::render(&plan, Some(&dir))
        .unwrap_err()
        .to_string()
        .contains("agent-config.yaml.j2"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// --- the whole module ---------------------------------------------------------------------------

mod module {
    use super::*;
    use std::fs;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ocp-mod-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn run(args: &Value, check: bool, diff: bool) -> Value {
        let mut a = args.clone();
        a["_ansible_check_mode"] = json!(check);
        a["_ansible_diff"] = json!(diff);
        let (r, _) = ansible_module::execute(
            &a.to_string(),
            "ocp_manifests",
            &crate::argument_spec(),
            crate::run,
        );
        r
    }

    fn assert_no_secret(r: &Value) {
        let text = r.to_string();
        for s in ["Y2FuYXJ5OnB1bGwtc2VjcmV0", "bWlycm9yOnMzY3IzdA", "auths"] {
            assert!(!text.contains(s), "secret fragment {s} in {text}");
        }
    }

    #[test]
    fn check_mode_then_write_then_rerun_then_change() {
        let dir = tmp("idem");
        let args = with(compact(), "output_dir", json!(dir.join("out")));
        let r = run(&args, true, true);
        assert_eq!(r["changed"], json!(true), "{r}");
        assert!(!dir.exists(), "check mode wrote something");
        assert_no_secret(&r);

        let r = run(&args, false, false);
        assert_eq!(r["changed"], json!(true), "{r}");
        assert_eq!(r["topology"], json!("compact"));
        let mut node = r["nodes"][0].clone();
        // Its nodes-config.yaml entry is checked against agent-config by nodes_config_host_is_…
        assert_eq!(node["nodes_config"]["hostname"], json!("master-0"));
        node.as_object_mut().unwrap().remove("nodes_config");
        assert_eq!(
            node,
            json!({"name": "master-0", "role": "master", "ip": "192.168.50.10", "secondary_ip": null, "mac": "bc:24:11:00:00:01", "interface": "ens18"})
        );
        use std::os::unix::fs::PermissionsExt;
        let ic = dir.join("out/install-config.yaml");
        assert_eq!(
            fs::metadata(&ic).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            fs::metadata(dir.join("out")).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let doc: Value = serde_yaml_ng::from_str(&fs::read_to_string(&ic).unwrap()).unwrap();
        assert_eq!(doc["pullSecret"], json!(PULL_SECRET));
        assert_no_secret(&r);

        let r = run(&args, false, true);
        assert_eq!(r["changed"], json!(false), "{r}");
        assert!(r.get("diff").is_none());

        // A change: diff shows it with secrets masked, the old file is backed up.
        let changed = with(
            args.clone(),
            "pull_secret",
            json!(r#"{"auths":{"quay.io":{"auth":"bmV3LXNlY3JldC12YWx1ZQ=="}}}"#),
        );
        let r = run(
            &with(changed.clone(), "ingress_vips", json!(["192.168.50.7"])),
            false,
            true,
        );
        assert_eq!(r["changed"], json!(true));
        let diff = r["diff"].to_string();
        assert!(
            diff.contains("192.168.50.7") && diff.contains("192.168.50.6"),
            "{diff}"
        );
        assert!(
            !diff.contains("bmV3LXNlY3JldC12YWx1ZQ")
                && !diff.contains("Y2FuYXJ5")
                && !diff.contains("ssh-ed25519 AAAA"),
            "{diff}"
        );
        let backups = r["backups"].as_array().unwrap();
        assert_eq!(backups.len(), 1, "{r}");
        let old = fs::read_to_string(backups[0].as_str().unwrap()).unwrap();
        assert!(old.contains("192.168.50.6"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn validation_failure_names_fields_and_hides_secrets() {
        let args = with(
            with(compact(), "cluster_name", json!("Bad")),
            "api_vips",
            json!(["192.168.50.11"]),
        );
        let r = run(&args, false, false);
        assert_eq!(r["failed"], json!(true));
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("cluster_name:") && msg.contains("api_vips[0]:"),
            "{msg}"
        );
        assert_eq!(r["problems"].as_array().unwrap().len(), 2, "{r}");
        assert_no_secret(&r);
        assert_eq!(
            r["invocation"]["module_args"]["pull_secret"],
            json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
        );
    }

    /// The double reports 4.19.7 (PROXSHIFT_TEST_INSTALLER_VERSION unset): a 4.19 cluster.
    fn double() -> String {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/bin/openshift-install")
            .display()
            .to_string()
    }

    /// A 4.19 SNO that builds its ISO in `dir` with the double.
    fn sno_building_in(dir: &Path) -> Value {
        let v = with(
            with(sno(), "version", json!("4.19")),
            "output_dir",
            json!(dir),
        );
        with(v, "openshift_install", json!(double()))
    }

    #[test]
    fn agent_iso_built_reused_and_rebuilt() {
        let dir = tmp("iso");
        let args = sno_building_in(&dir);
        let r = run(&args, true, false);
        assert_eq!(
            (r["changed"].clone(), r["iso_built"].clone()),
            (json!(true), json!(false)),
            "{r}"
        );
        assert!(!dir.exists());

        let r = run(&args, false, false);
        assert_eq!(r["iso_built"], json!(true), "{r}");
        let iso = PathBuf::from(r["iso_path"].as_str().unwrap());
        assert_eq!(iso, dir.join("agent/agent.x86_64.iso"));
        assert!(fs::read_to_string(&iso)
            .unwrap()
            .starts_with("PROXSHIFT-TEST-DOUBLE-ISO"));
        let kubeconfig = fs::read_to_string(r["kubeconfig_path"].as_str().unwrap()).unwrap();
        assert!(
            kubeconfig.contains("https://api.lab.example.com:6443"),
            "{kubeconfig}"
        );
        let pw = fs::read_to_string(r["kubeadmin_password_path"].as_str().unwrap()).unwrap();
        assert_eq!(pw.len(), 23);
        // The rendered files stay in output_dir (the installer consumed only its copies).
        assert!(
            dir.join("install-config.yaml").is_file()
                && !dir.join("agent/install-config.yaml").exists()
        );

        let r = run(&args, false, false);
        assert_eq!(
            (r["changed"].clone(), r["iso_built"].clone()),
            (json!(false), json!(false)),
            "{r}"
        );
        assert!(r["iso_reason"].as_str().unwrap().starts_with("kept"));

        // Changed inputs rebuild; a too-old ISO rebuilds.
        let r = run(
            &with(args.clone(), "ntp_servers", json!(["192.168.50.2"])),
            false,
            false,
        );
        assert_eq!(r["iso_built"], json!(true), "{r}");
        let r = run(
            &with(
                with(args.clone(), "ntp_servers", json!(["192.168.50.2"])),
                "iso_max_age_hours",
                json!(0),
            ),
            false,
            false,
        );
        assert_eq!(r["iso_built"], json!(true), "{r}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Extra manifests: checked (file and document named), kept under output_dir/openshift/ like
    /// the rendered files (check mode writes nothing), and handed to the installer in openshift/.
    #[test]
    fn extra_manifests_reach_the_build_or_are_refused() {
        let dir = tmp("extra");
        let src = tmp("extra-src");
        fs::create_dir_all(&src).unwrap();
        let good = src.join("99-chrony.yaml");
        fs::write(&good, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n").unwrap();
        let bad = src.join("bad.yml");
        fs::write(
            &bad,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Namespace\n",
        )
        .unwrap();
        let args = with(sno_building_in(&dir), "extra_manifests", json!([good]));
        let r = run(
            &with(args.clone(), "extra_manifests", json!([good, bad])),
            false,
            false,
        );
        assert_eq!(r["failed"], json!(true), "{r}");
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("extra_manifests[1]") && msg.contains("bad.yml: document 1: apiVersion"),
            "{msg}"
        );
        assert!(!dir.exists(), "nothing written");

        let r = run(&args, true, false);
        assert_eq!(r["changed"], json!(true), "{r}");
        assert!(!dir.exists());
        let r = run(&args, false, false);
        assert_eq!(r["iso_built"], json!(true), "{r}");
        let kept = dir.join("openshift/99-chrony.yaml");
        assert_eq!(r["extra_manifest_paths"], json!([kept]));
        assert_eq!(
            fs::read_to_string(&kept).unwrap(),
            fs::read_to_string(&good).unwrap()
        );
        let log = fs::read_to_string(dir.join("agent/.openshift_install.log")).unwrap();
        assert!(log.contains("extra manifest 99-chrony.yaml"), "{log}");
        // Unchanged: nothing to do; a changed manifest rebuilds the ISO.
        assert_eq!(run(&args, false, false)["changed"], json!(false));
        fs::write(
            &good,
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: c}\n",
        )
        .unwrap();
        let r = run(&args, false, false);
        assert_eq!(
            (r["changed"].clone(), r["iso_built"].clone()),
            (json!(true), json!(true)),
            "{r}"
        );
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&src).unwrap();
    }

    #[test]
    fn installer_failure_returns_log_tail_and_keeps_old_iso() {
        let dir = tmp("isofail");
        let args = with(
            with(
                with(sno(), "version", json!("4.19")),
                "output_dir",
                json!(dir),
            ),
            "openshift_install",
            json!(double()),
        );
        assert_eq!(run(&args, false, false)["iso_built"], json!(true));
        // "installer-fail" in the install-config is the double's failure marker.
        let r = run(
            &with(
                args.clone(),
                "base_domain",
                json!("installer-fail.example.com"),
            ),
            false,
            false,
        );
        assert_eq!(r["failed"], json!(true), "{r}");
        assert_eq!(
            r["changed"],
            json!(true),
            "the manifests were written before the build"
        );
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("test double failure marker"),
            "{r}"
        );
        assert!(r["installer_log_tail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("level=fatal")));
        assert!(
            dir.join("agent/agent.x86_64.iso").is_file(),
            "previous ISO kept"
        );
        let failed_dir = PathBuf::from(r["installer_dir"].as_str().unwrap());
        assert!(
            failed_dir.join(".openshift_install.log").is_file(),
            "failed build kept for inspection"
        );
        assert_no_secret(&r);
        let r = run(
            &with(
                args.clone(),
                "openshift_install",
                json!("/nonexistent/openshift-install"),
            ),
            false,
            false,
        );
        assert!(
            r["msg"].as_str().unwrap().contains("not an executable"),
            "{r}"
        );
        // The next successful build clears the failed work dir.
        let r = run(
            &with(args, "ntp_servers", json!(["192.168.50.2"])),
            false,
            false,
        );
        assert_eq!(r["iso_built"], json!(true), "{r}");
        assert!(!failed_dir.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The installer runs `oc` by name to extract the base ISO: the cache's `oc-<version>` beside
    /// `openshift-install-<version>` is put first on its PATH, and reported as `oc_path`.
    #[test]
    fn the_cache_oc_reaches_the_installer() {
        let cache = tmp("oc-cache");
        fs::create_dir_all(&cache).unwrap();
        std::os::unix::fs::symlink(double(), cache.join("openshift-install-4.19.7")).unwrap();
        let oc = installer_of(&cache, "oc-4.19.7", "");
        let dir = tmp("oc-out");
        let args = sno_from_cache("4.19.7", &dir, &cache);
        let r = run(&args, false, false);
        assert_eq!(
            (r["iso_built"].clone(), r["oc_path"].clone()),
            (json!(true), json!(oc)),
            "{r}"
        );
        let log = fs::read_to_string(dir.join("agent/.openshift_install.log")).unwrap();
        assert!(
            log.contains("oc for the release payload: ") && log.contains(".proxshift-oc/oc"),
            "{log}"
        );
        assert!(
            !dir.join("agent/.proxshift-oc").exists(),
            "the PATH shim is removed"
        );
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&cache).unwrap();
    }

    /// A SNO of `version` writing to `dir`, its installer taken from `cache`.
    fn sno_from_cache(version: &str, dir: &Path, cache: &Path) -> Value {
        let v = with(
            with(sno(), "version", json!(version)),
            "output_dir",
            json!(dir),
        );
        with(v, "openshift_install_cache", json!(cache))
    }

    /// An installer script reporting `version`, like the real one does.
    fn installer_of(dir: &Path, name: &str, version: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        fs::write(&p, format!("#!/bin/sh\necho \"$0 {version}\"\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn installer_is_chosen_per_version_and_a_wrong_one_refused_before_writing() {
        let bins = tmp("installers");
        let i416 = installer_of(&bins, "oi-416", "4.16.3");
        let dir = tmp("per-version");
        let map = json!({"4.16": i416, "4.19.7": "/nonexistent/never-used"});
        let args = with(
            with(
                with(sno(), "output_dir", json!(dir)),
                "openshift_installers",
                map,
            ),
            "build_iso",
            json!(false),
        );
        let r = run(&args, true, false);
        assert_eq!(r["failed"], json!(null), "{r}");
        assert_eq!(r["installer_path"], json!(i416), "{r}");
        assert_eq!(r["installer_version"], json!("4.16.3"));
        assert_eq!(r["installer_source"], json!("openshift_installers[4.16]"));
        assert_eq!(
            r["iso_built"],
            json!(null),
            "build_iso false builds nothing"
        );

        // The cache: openshift-install-<version>; a binary of another version there is refused.
        let cache = bins.join("cache");
        installer_of(&cache, "openshift-install-4.16.3", "4.16.4");
        let args = sno_from_cache("4.16.3", &dir, &cache);
        let r = run(&args, false, false);
        assert_eq!(r["failed"], json!(true), "{r}");
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("4.16.4")
                && msg.contains("4.16.3")
                && msg.contains("openshift-install-4.16.3"),
            "{msg}"
        );
        assert_eq!(r["problems"][0]["rule"], json!("installer-version"), "{r}");
        assert!(
            !dir.exists(),
            "nothing written before the installer was checked"
        );

        // Not found and not required: rendered, no ISO, and where it looked is reported.
        let args = with(
            with(sno(), "output_dir", json!(dir)),
            "openshift_install_cache",
            json!(bins.join("empty")),
        );
        let r = run(&args, true, false);
        assert_eq!(r["failed"], json!(null), "{r}");
        assert!(
            r["installer_missing"]
                .as_str()
                .unwrap()
                .contains("version 4.16"),
            "{r}"
        );
        assert_eq!(r["installer_looked_in"].as_array().unwrap().len(), 1, "{r}");
        // Required: a failure naming the places, listed with the validation problems.
        let required = with(args, "installer_required", json!(true));
        let r = run(&required, true, false);
        assert_eq!(r["problems"][0]["rule"], json!("installer-missing"), "{r}");
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("openshift-install-4.16"),
            "{r}"
        );
        let r = run(
            &with(required, "machine_networks", json!(["nope"])),
            true,
            false,
        );
        let rules: Vec<&str> = r["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["rule"].as_str().unwrap())
            .collect();
        assert!(
            rules.len() > 1 && rules.contains(&"installer-missing"),
            "{rules:?}"
        );
        fs::remove_dir_all(&bins).unwrap();
    }

    #[test]
    fn an_installer_missing_everywhere_is_extracted_from_the_release_image_once() {
        let bins = tmp("extract");
        fs::create_dir_all(&bins).unwrap();
        let oc = crate::release::tests::fake_oc(&bins, "4.19.7");
        let cache = bins.join("cache");
        let dir = bins.join("out");
        let image = format!("{}:4.19.7-x86_64", crate::release::RELEASE_REPOSITORY);
        let args = with(
            with(
                with(
                    with(sno(), "version", json!("4.19.7")),
                    "output_dir",
                    json!(dir),
                ),
                "openshift_install_cache",
                json!(cache),
            ),
            "oc_binary",
            json!(oc),
        );
        let args = with(
            with(args, "build_iso", json!(false)),
            "installer_required",
            json!(true),
        );
        // The site's one installer is of another release: not refused, passed over for the extraction.
        let global = installer_of(&bins, "openshift-install", "4.18.1");
        let args = with(args, "openshift_install", json!(global));
        // Check mode: what would be extracted, nothing done.
        let r = run(&args, true, false);
        assert_eq!(
            (r["failed"].clone(), r["changed"].clone()),
            (json!(null), json!(true)),
            "{r}"
        );
        assert_eq!(r["installer_release_image"], json!(image), "{r}");
        assert_eq!(
            r["installer_path"],
            json!(cache.join("openshift-install-4.19.7"))
        );
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("would extract openshift-install from"),
            "{r}"
        );
        assert!(!cache.exists() && !bins.join("calls").exists());
        // For real: extracted, checked and placed; the pull secret reached oc only.
        let r = run(&args, false, false);
        assert_eq!(r["installer_version"], json!("4.19.7"), "{r}");
        assert_eq!(
            r["installer_source"],
            json!(format!("release image {image}"))
        );
        assert!(cache.join("openshift-install-4.19.7").is_file());
        assert_no_secret(&r);
        // The next run finds it in the cache; so does installer_only, which needs no pull secret then.
        let r = run(&args, false, false);
        assert_eq!(
            r["installer_source"],
            json!("openshift_install_cache"),
            "{r}"
        );
        let mut only = with(args.clone(), "installer_only", json!(true));
        only.as_object_mut().unwrap().remove("pull_secret");
        fs::remove_dir_all(&dir).unwrap();
        let r = run(&only, false, false);
        assert_eq!(
            (r["changed"].clone(), r["installer_source"].clone()),
            (json!(false), json!("openshift_install_cache")),
            "{r}"
        );
        let calls = fs::read_to_string(bins.join("calls")).unwrap();
        assert_eq!(calls.lines().count(), 1, "{calls}");
        // A minor names no release: refused with what to give instead, and installer_only without a
        // pull secret cannot extract (no global installer to pass over here: of another version and
        // nothing to extract, it is refused as such).
        let mut args = args;
        args.as_object_mut().unwrap().remove("openshift_install");
        only.as_object_mut().unwrap().remove("openshift_install");
        let r = run(&with(args.clone(), "version", json!("4.16")), true, false);
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("not extracted from a release image: ocp_version 4.16 is a minor"),
            "{msg}"
        );
        assert_eq!(r["problems"][0]["rule"], json!("installer-missing"), "{r}");
        let r = run(&with(only, "version", json!("4.18.2")), false, false);
        assert!(r["msg"].as_str().unwrap().contains("no pull secret"), "{r}");
        assert!(!dir.exists(), "installer_only wrote into output_dir");
        fs::remove_dir_all(&bins).unwrap();
    }
}

#[test]
fn nmstatectl_gc_runs_per_host_and_reports_its_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ocp-nmstatectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Stand-ins for nmstatectl: one accepts (and records its arguments), one fails like nmstatectl.
    let log = dir.join("calls");
    let ok = dir.join("ok");
    let bad = dir.join("bad");
    std::fs::write(
        &ok,
        format!(
            "#!/bin/sh\necho \"$1 $2 $(grep -c mac-address \"$3\")\" >> {}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::write(
        &bad,
        "#!/bin/sh\necho 'NmstateError: InvalidArgument: Invalid YAML string' >&2\nexit 1\n",
    )
    .unwrap();
    for f in [&ok, &bad] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let plan = ok_plan(&ha());
    assert_eq!(crate::nmstatectl_check(None, &plan, &dir), Ok(false));
    assert_eq!(crate::nmstatectl_check(Some(&ok), &plan, &dir), Ok(true));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "gc -- 1\n".repeat(5)
    );
    let problems = crate::nmstatectl_check(Some(&bad), &plan, &dir).unwrap_err();
    assert_eq!(problems.len(), 5);
    assert_eq!(problems[4].path, "nodes[4].network_config");
    assert_eq!(problems[4].rule, "nmstatectl-gc");
    assert!(
        problems[0].msg.contains("Invalid YAML string"),
        "{problems:?}"
    );
    // The temporary per-host files are gone.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sidecar_matches_spec() {
    let stub = include_str!(
        "../../../ansible_collections/proxshift/openshift/plugins/modules/ocp_manifests.py"
    );
    let problems =
        ansible_module::sidecar::check_stub(&crate::argument_spec(), stub, "ocp_manifests");
    assert!(
        problems.is_empty(),
        "sidecar drift:\n{}",
        problems.join("\n")
    );
}

#[test]
fn nodes_config_host_is_the_agent_config_host_without_its_role() {
    // One source for both: the day-2 nodes-config.yaml entry of a host is its rendered agent-config
    // entry (interfaces, networkConfig, rootDeviceHints), so an added node gets the day-1 network.
    let (_, ha) = golden_cases()
        .into_iter()
        .find(|(name, _)| *name == "ha")
        .unwrap();
    let plan = ok_plan(&ha);
    let (_, ac) = crate::render::render(&plan, None).unwrap();
    let doc: Value = serde_yaml_ng::from_str(&ac).unwrap();
    for (h, rendered) in plan.hosts.iter().zip(doc["hosts"].as_array().unwrap()) {
        let mut want = rendered.clone();
        want.as_object_mut().unwrap().remove("role");
        assert_eq!(crate::nodes_config_host(h), want, "{}", h.name);
    }
    assert!(crate::nodes_config_host(&plan.hosts[3])["rootDeviceHints"].is_object());
}
