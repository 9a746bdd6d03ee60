//! Fault injection (Rust API, admin API, scenario file), the request log, TLS, seeding and
//! state dumps.

mod common;

use common::{agent, start, start_version, Api, BOTH_VERSIONS, ROOT_TOKEN};
use pvesim::{Config, Fault, Scenario, Seed, Simulator, Tls};
use serde_json::{json, Value};

fn admin(sim: &pvesim::SimHandle, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let url = format!("{}/_pvesim{path}", sim.url());
    let a = agent();
    let r = match (method, body) {
        ("GET", _) => a.get(&url).call(),
        ("DELETE", _) => a.delete(&url).call(),
        ("POST", Some(b)) => a.post(&url).send_json(b),
        ("PUT", Some(b)) => a.put(&url).send_json(b),
        _ => unreachable!(),
    }
    .unwrap();
    let status = r.status().as_u16();
    (status, r.into_body().read_json().unwrap())
}

#[test]
fn fail_next_tasks_of_a_kind() {
    let sim = start();
    let api = Api::root(&sim);
    let (s, _) = admin(
        &sim,
        "POST",
        "/faults",
        Some(
            json!({"fail_tasks": {"type": "qmstart", "count": 2, "message": "start failed: injected"}}),
        ),
    );
    assert_eq!(s, 200);
    for _ in 0..2 {
        let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
        assert_eq!(api.exit(&upid), "start failed: injected");
        assert_eq!(
            api.task_log(&upid),
            vec!["TASK ERROR: start failed: injected"]
        );
    }
    let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    let (_, armed) = admin(&sim, "GET", "/faults", None);
    assert_eq!(armed, json!([]));
}

#[test]
fn http_error_for_a_path_n_times() {
    let sim = start();
    let api = Api::root(&sim);
    sim.inject(Fault::HttpError {
        path: "/cluster/nextid".into(),
        method: Some("GET".into()),
        status: 503,
        message: Some("service unavailable".into()),
        count: 2,
    })
    .unwrap();
    for _ in 0..2 {
        let r = api.get("/cluster/nextid", &[]);
        assert_eq!((r.status, r.message()), (503, "service unavailable\n"));
    }
    assert_eq!(api.get("/cluster/nextid", &[]).status, 200);
}

/// A proxy in front of PVE answers 502/503/504 with its own HTML page: either without
/// forwarding (nothing happened) or after PVE carried the request out (a VM was created
/// although the client saw the error). The request log records the gateway's status.
#[test]
fn a_proxy_error_comes_before_or_after_the_effect() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        for (status, after_effect, vmid) in [(502, false, "270"), (504, true, "271")] {
            let (s, _) = admin(
                &sim,
                "POST",
                "/faults",
                Some(json!({"proxy_error": {
                    "path": "/nodes/pve1/qemu", "method": "POST",
                    "status": status, "after_effect": after_effect,
                }})),
            );
            assert_eq!(s, 200);
            let r = api.post("/nodes/pve1/qemu", &[("vmid", vmid), ("name", "p")]);
            assert_eq!(r.status, status, "PVE {v}");
            let page = r.body.as_str().unwrap_or_default();
            assert!(page.contains("<center>nginx</center>"), "PVE {v}: {page}");
            let created = sim.vm_config(vmid.parse().unwrap()).is_some();
            assert_eq!(created, after_effect, "PVE {v}: VM {vmid}");
            let logged = sim.requests().last().map(|r| (r.path.clone(), r.status));
            assert_eq!(logged, Some(("/nodes/pve1/qemu".to_string(), status)));
        }
        // Spent: the next create goes through.
        let r = api.post("/nodes/pve1/qemu", &[("vmid", "272")]);
        assert_eq!(r.status, 200, "PVE {v}");
    }
}

#[test]
fn latency_is_added() {
    let sim = start();
    let api = Api::root(&sim);
    sim.inject(Fault::Latency {
        path: Some("/version".into()),
        ms: 150,
        count: 1,
    })
    .unwrap();
    api.get("/version", &[]).ok();
    api.get("/version", &[]).ok();
    // One armed latency: the first answer is delayed, the second is not.
    let delays: Vec<u64> = sim.requests().iter().map(|r| r.delay_ms).collect();
    assert_eq!(delays, [150, 0]);
}

#[test]
fn request_log_records_and_redacts() {
    let sim = start();
    let api = Api::root(&sim);
    api.get("/nodes/pve1/qemu", &[]).ok();
    api.get("/nodes/pve1/qemu/100/config", &[]).ok();
    assert!(sim.writes().is_empty(), "only reads so far");
    api.put(
        "/nodes/pve1/qemu/100/config",
        &[("cipassword", "canary-secret-4711"), ("ciuser", "core")],
    )
    .ok();
    let writes = sim.writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].method, "PUT");
    assert_eq!(writes[0].path, "/nodes/pve1/qemu/100/config");
    assert_eq!(writes[0].params["cipassword"], pvesim::sim::REDACTED);
    assert_eq!(writes[0].params["ciuser"], "core");
    assert_eq!(writes[0].user.as_deref(), Some("root@pam!pvesim"));
    let (_, log) = admin(&sim, "GET", "/requests?since=2", None);
    assert_eq!(log.as_array().unwrap().len(), 1);
    assert!(!log.to_string().contains("canary-secret-4711"));
    // The config shows the password masked, too.
    assert_eq!(api.config("pve1", 100)["cipassword"], "**********");
    admin(&sim, "DELETE", "/requests", None);
    assert!(sim.requests().is_empty());
}

#[test]
fn admin_options_clock_state_and_node_offline() {
    let sim = start();
    let api = Api::root(&sim);
    let (s, o) = admin(
        &sim,
        "PUT",
        "/options",
        Some(json!({"time_scale": 1.0, "error_message": false})),
    );
    assert_eq!(s, 200);
    assert_eq!(o["time_scale"], 1.0);
    assert_eq!(
        api.get("/nodes/pve1/qemu/999/config", &[]).body,
        json!({"data": null})
    );
    let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
    assert_eq!(api.task(&upid)["status"], "running");
    admin(&sim, "POST", "/clock/advance", Some(json!({"seconds": 5})));
    assert_eq!(api.exit(&upid), "OK");
    let (_, tasks) = admin(&sim, "GET", "/tasks", None);
    assert_eq!(tasks[0]["upid"], upid.as_str());
    let (_, state) = admin(&sim, "GET", "/state", None);
    let vm = state["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 101)
        .unwrap();
    assert_eq!(vm["running"], true);
    admin(
        &sim,
        "POST",
        "/faults",
        Some(json!([{"node_offline": {"node": "pve3"}}])),
    );
    assert_eq!(api.get("/nodes/pve3/status", &[]).status, 595);
    admin(
        &sim,
        "POST",
        "/faults",
        Some(json!({"node_offline": {"node": "pve3", "offline": false}})),
    );
    assert_eq!(api.get("/nodes/pve3/status", &[]).status, 200);
    let (s, e) = admin(&sim, "POST", "/faults", Some(json!({"bogus": {}})));
    assert_eq!(s, 400);
    assert!(e["error"].as_str().unwrap().contains("invalid fault"));
    let (s, _) = admin(&sim, "GET", "/nope", None);
    assert_eq!(s, 404);
}

#[test]
fn scenario_file_is_applied_at_start() {
    let scenario = Scenario::from_yaml(
        "faults:\n  - node_offline: {node: pve3}\n  - stale_lock: {vmid: 101, lock: migrate}\n  - fail_tasks: {type: qmcreate, message: 'unable to create VM 900 - boom'}\n",
    )
    .unwrap();
    let sim = Simulator::start(Config {
        faults: scenario.faults,
        ..Config::default()
    })
    .unwrap();
    let api = Api::root(&sim);
    assert_eq!(api.get("/nodes/pve3/status", &[]).status, 595);
    assert_eq!(api.config("pve2", 101)["lock"], "migrate");
    let upid = api.post("/nodes/pve1/qemu", &[("vmid", "900")]).upid();
    assert_eq!(api.exit(&upid), "unable to create VM 900 - boom");
    assert!(sim.vm_config(900).is_none());
}

#[test]
fn tls_with_generated_ca() {
    let dir = std::env::temp_dir().join(format!("pvesim-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_path = dir.join("ca.pem");
    let sim = Simulator::start(Config {
        tls: Tls::Generated {
            ca_path: Some(ca_path.clone()),
        },
        ..Config::default()
    })
    .unwrap();
    assert!(sim.url().starts_with("https://127.0.0.1:"));
    let pem = std::fs::read(&ca_path).unwrap();
    assert_eq!(
        Some(String::from_utf8(pem.clone()).unwrap().as_str()),
        sim.ca_pem()
    );
    let cert = ureq::tls::Certificate::from_pem(&pem).unwrap();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]))
        .build();
    let trusting: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = trusting
        .get(format!("{}/version", sim.api_url()))
        .header("Authorization", format!("PVEAPIToken={ROOT_TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.body_mut().read_json().unwrap();
    assert_eq!(v["data"]["version"], "9.2.11");
    // Without the CA the certificate is rejected.
    let strict: ureq::Agent = ureq::Agent::config_builder().build().into();
    assert!(strict
        .get(format!("{}/version", sim.api_url()))
        .call()
        .is_err());
    sim.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn json_seed_and_dump_on_exit() {
    let seed_json = json!({
        "nodes": [{"name": "n1", "maxmem": "8G", "storages": [{"id": "data", "type": "lvmthin", "size": "100G"}]}],
        "users": [{"userid": "root@pam", "password": "pw"}],
        "tokens": [{"userid": "root@pam", "tokenid": "t", "secret": "s", "privsep": false}],
        "vms": [{"vmid": 100, "node": "n1", "config": {"name": "a", "scsi0": "data:vm-100-disk-0,size=10G"}}]
    });
    let seed = Seed::from_yaml(&seed_json.to_string()).unwrap();
    let dump = std::env::temp_dir().join(format!("pvesim-dump-{}.yaml", std::process::id()));
    let sim = Simulator::start(Config {
        seed,
        dump_on_exit: Some(dump.clone()),
        ..Config::default()
    })
    .unwrap();
    let api = Api::token(&sim, "root@pam!t=s");
    let st = api.get("/nodes/n1/storage", &[]).ok().clone();
    assert_eq!(
        st[0]["used"],
        10u64 << 30,
        "seeded VM disk occupies its storage"
    );
    let upid = api
        .post("/nodes/n1/qemu", &[("vmid", "101"), ("scsi0", "data:5")])
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    sim.shutdown();
    let text = std::fs::read_to_string(&dump).unwrap();
    let reloaded = Seed::from_yaml(&text).unwrap();
    assert_eq!(reloaded.vms.len(), 2);
    // The dump is a valid seed: a new simulator starts from it with the same VMs.
    let sim2 = Simulator::start(Config::with_seed(reloaded)).unwrap();
    let api2 = Api::token(&sim2, "root@pam!t=s");
    assert_eq!(
        api2.config("n1", 101)["scsi0"],
        "data:vm-101-disk-0,size=5G"
    );
    std::fs::remove_file(&dump).ok();
}

#[test]
fn invalid_seeds_are_rejected_with_a_reason() {
    let bad =
        Seed::from_yaml("nodes: [{name: a, storages: []}]\nvms: [{vmid: 1, node: b}]\n").unwrap();
    let err = Simulator::start(Config::with_seed(bad)).err().unwrap();
    assert_eq!(err.to_string(), "vm 1: unknown node b");
    assert!(matches!(
        err,
        pvesim::StartError::Seed(pvesim::SeedError::VmNode { vmid: 1, .. })
    ));
    assert!(Seed::from_yaml("nodes: [{name: a, bogus: 1}]")
        .unwrap_err()
        .to_string()
        .contains("bogus"));
}
