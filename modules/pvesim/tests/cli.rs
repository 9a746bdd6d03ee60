//! The `pvesim` binary: help text, serving, TLS CA file, dump on SIGINT.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{agent, ROOT_TOKEN};

const BIN: &str = env!("CARGO_BIN_EXE_pvesim");

/// Starts the binary and returns it with its announced API URL.
fn spawn(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--auth-delay-ms",
            "0",
            "--time-scale",
            "0",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("binary runs");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("pvesim listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, url)
}

fn interrupt(child: &mut Child) {
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn help_documents_seeding_tls_time_and_faults() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for word in [
        "SEEDING",
        "TLS",
        "TIME",
        "FAULT INJECTION",
        "ADMIN API",
        "--seed",
        "--time-scale",
        "--scenario",
        "--cert",
    ] {
        assert!(text.contains(word), "--help lacks {word}");
    }
}

#[test]
fn serves_the_lab_and_dumps_state_on_interrupt() {
    let dir = std::env::temp_dir().join(format!("pvesim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join("state.yaml");
    let (mut child, url) = spawn(&["--dump-state", dump.to_str().unwrap()]);
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/api2/json"),
        "{url}"
    );
    let mut r = agent()
        .post(format!("{url}/nodes/pve1/qemu"))
        .header("Authorization", format!("PVEAPIToken={ROOT_TOKEN}"))
        .send_form([("vmid", "777"), ("name", "from-cli")])
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "{}",
        r.body_mut().read_to_string().unwrap()
    );
    interrupt(&mut child);
    let state = pvesim::Seed::from_file(&dump).unwrap();
    assert!(state
        .vms
        .iter()
        .any(|v| v.vmid == 777 && v.config["name"] == "from-cli"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn tls_writes_the_ca_file() {
    let dir = std::env::temp_dir().join(format!("pvesim-cli-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let (mut child, url) = spawn(&["--tls", "--ca-out", ca.to_str().unwrap()]);
    assert!(url.starts_with("https://"), "{url}");
    let pem = std::fs::read(&ca).unwrap();
    let cert = ureq::tls::Certificate::from_pem(&pem).unwrap();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]))
        .build();
    let a: ureq::Agent = ureq::Agent::config_builder().tls_config(tls).build().into();
    let r = a
        .get(format!("{url}/version"))
        .header("Authorization", format!("PVEAPIToken={ROOT_TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    interrupt(&mut child);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_seed_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("pvesim-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seed = dir.join("seed.yaml");
    std::fs::write(&seed, "nodes: [{name: a, cpus: many}]\n").unwrap();
    let out = Command::new(BIN)
        .args(["--seed", seed.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("pvesim: invalid seed:"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn pve_version_flag_reaches_the_version_endpoint() {
    let (mut child, url) = spawn(&["--pve-version", "8.4.1"]);
    let mut r = agent()
        .get(format!("{url}/version"))
        .header("Authorization", format!("PVEAPIToken={ROOT_TOKEN}"))
        .call()
        .unwrap();
    let body: serde_json::Value = r.body_mut().read_json().unwrap();
    assert_eq!(body["data"]["version"], "8.4.1");
    assert_eq!(body["data"]["release"], "8.4");
    interrupt(&mut child);
    let out = Command::new(BIN)
        .args(["--pve-version", "7.4"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
