//! vm_lifecycle end to end against an in-process pvesim: the real module body (`vm_lifecycle::run`,
//! through the Ansible protocol layer) talks HTTP to a simulated cluster whose task durations are
//! PVE's real ones scaled down, so polling, ordering and parallelism are exercised for real.

use std::time::{Duration, Instant};

use module_testkit::TestModule;
use pvesim::{Config, Fault, Seed, SimHandle, Simulator};
use serde_json::{json, Value};

/// A canary token secret: it must never appear in a result.
const SECRET: &str = "7c0ffee0-0000-4000-8000-canary000042";

/// Node, then (vmid, name, extra seed keys as YAML lines).
fn seed(node_mem: &str, vms: &[(u32, &str, &str, &str)]) -> Seed {
    let mut y = format!(
        "nodes:\n  - {{name: pve1, maxmem: {node_mem}}}\n  - {{name: pve2, maxmem: {node_mem}}}\n\
         users:\n  - {{userid: root@pam}}\n\
         tokens:\n  - {{userid: root@pam, tokenid: lc, secret: {SECRET}, privsep: false}}\nvms:\n"
    );
    for (vmid, name, node, extra) in vms {
        y.push_str(&format!(
            "  - vmid: {vmid}\n    node: {node}\n    config:\n      name: {name}\n      memory: \"4096\"\n      \
             agent: \"1\"\n      tags: \"ocp1;proxshift\"\n      net0: \"virtio=BC:24:11:00:00:{:02X},bridge=vmbr0\"\n",
            vmid % 256
        ));
        for line in extra.lines().filter(|l| !l.trim().is_empty()) {
            y.push_str(&format!("    {}\n", line.trim()));
        }
    }
    let mut seed = Seed::from_yaml(&y).unwrap();
    // The release `make test` plays (`PVESIM_PVE_VERSION`, default the newest).
    seed.cluster.version = pvesim::lab::release_under_test().to_string();
    seed
}

fn start(seed: Seed, time_scale: f64) -> SimHandle {
    let mut cfg = Config::with_seed(seed);
    cfg.options.time_scale = time_scale;
    cfg.options.agent_delay = 20.0;
    cfg.options.auth_failure_delay_ms = 0;
    Simulator::start(cfg).unwrap()
}

/// Run the module as Ansible would, minus the process boundary.
fn module(sim: &SimHandle, mut args: Value) -> (Value, i32) {
    args["api_host"] = json!(sim.url());
    args["api_token_id"] = json!("root@pam!lc");
    args["api_token_secret"] = json!(SECRET);
    TestModule::new(
        "vm_lifecycle",
        vm_lifecycle::argument_spec(),
        vm_lifecycle::run,
    )
    .hiding(SECRET)
    .run(&args)
}

fn vms(r: &Value) -> Vec<Value> {
    r["vms"].as_array().cloned().unwrap_or_default()
}

fn vm<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == json!(name))
        .unwrap_or_else(|| panic!("no {name} in {r}"))
}

/// (vmid, endpoint) of each power POST, in order.
fn power_posts(sim: &SimHandle) -> Vec<(u32, String)> {
    sim.writes()
        .iter()
        .filter_map(|w| {
            let rest = w.path.strip_prefix("/nodes/")?;
            let parts: Vec<&str> = rest.split('/').collect();
            match parts.as_slice() {
                [_, "qemu", id, "status", action] => Some((id.parse().ok()?, action.to_string())),
                _ => None,
            }
        })
        .collect()
}

/// (vmid, start, end) of every task of `kind`, from the simulator's clock.
fn task_windows(sim: &SimHandle, kind: &str) -> Vec<(u32, Instant, Instant)> {
    sim.with_sim(|s| {
        let len = s.scaled(pvesim::tasks::base_duration(kind));
        s.tasks
            .iter()
            .filter(|t| t.kind == kind)
            .map(|t| (t.id.parse().unwrap(), t.ends_at - len, t.ends_at))
            .collect()
    })
}

fn running(sim: &SimHandle, vmid: u32) -> bool {
    sim.with_sim(|s| s.vms[&vmid].running())
}

#[test]
fn order_steps_and_parallel_bound_hold_on_the_simulators_clock() {
    let sim = start(
        seed(
            "64G",
            &[
                (101, "master-0", "pve1", ""),
                (102, "master-1", "pve1", ""),
                (103, "master-2", "pve2", ""),
                (104, "worker-0", "pve2", ""),
                (105, "worker-1", "pve1", ""),
            ],
        ),
        0.25,
    );
    let (r, code) = module(
        &sim,
        json!({"state": "started", "tags": ["proxshift"], "order": ["master-0"], "parallel": 2}),
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["totals"]["changed"], json!(5));
    let w = task_windows(&sim, "qmstart");
    assert_eq!(w.len(), 5);
    let first = w.iter().find(|t| t.0 == 101).unwrap();
    for t in w.iter().filter(|t| t.0 != 101) {
        assert!(
            t.1 >= first.2,
            "VM {} started before the rendezvous host was up",
            t.0
        );
    }
    // At most two qmstart tasks overlap at any instant, and two really did run together.
    let mut max = 0;
    for t in &w {
        let at = t.1 + Duration::from_millis(1);
        max = max.max(w.iter().filter(|o| o.1 <= at && at < o.2).count());
    }
    assert_eq!(max, 2, "{w:?}");
    assert_eq!(power_posts(&sim)[0], (101, "start".into()));
    assert_eq!(vm(&r, "master-0")["step"], json!(1));
    assert_eq!(vm(&r, "worker-1")["step"], json!(2));
}

/// A hibernated VM (qemu-server `vm_suspend` with `todisk`: stopped, `lock: suspended`, its memory
/// in `vmstate`): `stopped` leaves it so, `started` starts it, which resumes it from its state
/// (`vm_start` takes the `suspended` lock) — one start, no waiting for the lock to go.
#[test]
fn a_hibernated_vm_is_stopped_and_started_resumes_it() {
    for version in ["8.4.1", "9.2.11"] {
        let mut s = seed("64G", &[(101, "sno", "pve1", "running: true")]);
        s.cluster.version = version.into();
        // The state goes to `local` (`find_vmstate_storage`'s fallback for a VM without disks).
        let local = Seed::from_yaml(
            "nodes:\n  - {name: pve1, storages: [{id: local, type: dir, content: [images], size: 100G}]}\n",
        )
        .unwrap();
        s.nodes[0].storages = local.nodes[0].storages.clone();
        let sim = start(s, 0.1);
        let mut o = pve_client::ConnectionOptions::new(sim.url());
        o.api_token_id = Some("root@pam!lc".into());
        o.api_token_secret = Some(SECRET.into());
        pve_client::Client::new(&o)
            .unwrap()
            .vm_action(
                "pve1",
                101,
                "suspend",
                &pve_client::Params::new().flag("todisk", true),
                Duration::from_secs(60),
            )
            .unwrap();
        assert_eq!(sim.vm_config(101).unwrap()["lock"], "suspended");
        sim.clear_requests();
        let (r, code) = module(&sim, json!({"state": "stopped", "vmid": 101}));
        assert_eq!(
            (code, r["changed"].clone()),
            (0, json!(false)),
            "{version}: {r}"
        );
        let (r, code) = module(&sim, json!({"state": "started", "vmid": 101}));
        assert_eq!(code, 0, "{version}: {r}");
        assert_eq!(vms(&r)[0]["actions"], json!(["start"]), "{version}: {r}");
        assert!(running(&sim, 101), "{version}");
        let conf = sim.vm_config(101).unwrap();
        assert!(
            !conf.contains_key("lock") && !conf.contains_key("vmstate"),
            "{version}: {conf:?}"
        );
        assert_eq!(power_posts(&sim), [(101, "start".to_string())], "{version}");
    }
}

#[test]
fn check_mode_writes_nothing_and_reruns_are_idempotent() {
    let sim = start(
        seed(
            "64G",
            &[(101, "a", "pve1", "running: true"), (102, "b", "pve1", "")],
        ),
        0.1,
    );
    let args = json!({"state": "stopped", "vms": ["a", 102], "_ansible_check_mode": true,
                      "_ansible_diff": true});
    let (r, code) = module(&sim, args);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["changed"], json!(true));
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert_eq!(
        r["diff"]["before"],
        json!({"a (101)": "running", "b (102)": "stopped"})
    );
    assert_eq!(
        r["diff"]["after"],
        json!({"a (101)": "stopped", "b (102)": "stopped"})
    );
    assert!(running(&sim, 101));

    let (r, _) = module(&sim, json!({"state": "stopped", "vms": ["a", 102]}));
    assert_eq!(r["changed"], json!(true), "{r}");
    assert!(!running(&sim, 101));
    sim.clear_requests();
    let (r, code) = module(&sim, json!({"state": "stopped", "vms": ["a", 102]}));
    assert_eq!((code, r["changed"].clone()), (0, json!(false)), "{r}");
    assert!(sim.writes().is_empty(), "rerun wrote {:?}", sim.writes());
}

#[test]
fn every_state_moves_the_vm_and_qmpstatus_tells_paused_from_running() {
    let sim = start(seed("64G", &[(101, "sno", "pve1", "running: true")]), 0.1);
    let step = |state: &str| {
        let (r, code) = module(&sim, json!({"state": state, "vmid": 101, "name": "sno"}));
        assert_eq!(code, 0, "{state}: {r}");
        vms(&r)[0].clone()
    };
    let p = step("paused");
    assert_eq!(
        (p["status"].clone(), p["qmpstatus"].clone()),
        (json!("running"), json!("paused"))
    );
    assert_eq!(p["after"], json!("paused"));
    assert_eq!(step("paused")["changed"], json!(false));
    let s = step("started");
    assert_eq!(
        (s["actions"].clone(), s["after"].clone()),
        (json!(["resume"]), json!("running"))
    );
    let r = step("restarted");
    assert_eq!(r["actions"], json!(["reboot"]));
    assert_eq!(r["changed"], json!(true));
    assert_eq!(step("reset")["actions"], json!(["reset"]));
    let st = step("stopped");
    assert_eq!(
        (st["before"].clone(), st["after"].clone()),
        (json!("running"), json!("stopped"))
    );
    assert_eq!(step("stopped")["changed"], json!(false));
    assert_eq!(step("restarted")["actions"], json!(["start"]));
    assert_eq!(
        power_posts(&sim)
            .iter()
            .map(|p| p.1.as_str())
            .collect::<Vec<_>>(),
        vec!["suspend", "resume", "reboot", "reset", "shutdown", "start"]
    );
    let kinds: Vec<String> = sim.with_sim(|s| s.tasks.iter().map(|t| t.kind.clone()).collect());
    assert_eq!(
        kinds,
        vec![
            "qmpause",
            "qmresume",
            "qmreboot",
            "qmreset",
            "qmshutdown",
            "qmstart"
        ]
    );
}

#[test]
fn waits_for_the_agent_and_reports_routable_addresses() {
    let sim = start(
        seed(
            "64G",
            &[(101, "m0", "pve1", "agent_ips: {net0: [\"192.0.2.10/24\"]}")],
        ),
        0.1,
    );
    let (r, code) = module(
        &sim,
        json!({"state": "started", "vmid": 101, "wait_for": "ip"}),
    );
    assert_eq!(code, 0, "{r}");
    // The agent answers 20 s × 0.1 after the start: the module asked it after the start, was
    // refused while it was not up yet, and stopped asking once it answered.
    let log = sim.requests();
    let start = log
        .iter()
        .position(|q| q.method == "POST" && q.path.ends_with("/status/start"))
        .expect("a start request");
    let agent: Vec<u16> = log
        .iter()
        .filter(|q| q.path.ends_with("/agent/network-get-interfaces"))
        .map(|q| q.status)
        .collect();
    assert!(log[..start]
        .iter()
        .all(|q| !q.path.ends_with("/agent/network-get-interfaces")));
    assert!(
        agent.len() >= 2 && agent[..agent.len() - 1].iter().all(|s| *s != 200),
        "{agent:?}"
    );
    assert_eq!(agent.last(), Some(&200));
    assert_eq!(vms(&r)[0]["ips"], json!(["192.0.2.10"]));
    // Agent-less addresses (lo, link-local) never count.
    let (r, _) = module(&sim, json!({"state": "status", "vmid": 101}));
    assert_eq!(vms(&r)[0]["ips"], json!(["192.0.2.10"]));
}

#[test]
fn ha_managed_vms_use_ha_tasks_and_end_in_the_real_state() {
    let sim = start(seed("64G", &[(101, "ha0", "pve1", "ha: true")]), 0.1);
    let (r, code) = module(&sim, json!({"state": "started", "vmid": 101}));
    assert_eq!(code, 0, "{r}");
    let v = &vms(&r)[0];
    assert_eq!(v["ha"]["managed"], json!(true));
    assert_eq!(v["after"], json!("running"));
    let (r, code) = module(&sim, json!({"state": "stopped", "vmid": 101}));
    assert_eq!(code, 0, "{r}");
    assert!(!running(&sim, 101));
    let kinds: Vec<String> = sim.with_sim(|s| s.tasks.iter().map(|t| t.kind.clone()).collect());
    assert_eq!(kinds, vec!["hastart", "hastop"]);
}

#[test]
fn offline_node_fails_only_its_vms_and_can_be_tolerated() {
    let sim = start(
        seed("64G", &[(101, "a", "pve1", ""), (102, "b", "pve2", "")]),
        0.1,
    );
    sim.inject(Fault::NodeOffline {
        node: "pve2".into(),
        offline: true,
    })
    .unwrap();
    let (r, code) = module(&sim, json!({"state": "started", "tags": ["ocp1"]}));
    assert_eq!(code, 1);
    assert_eq!(r["changed"], json!(true));
    assert!(running(&sim, 101));
    let b = vm(&r, "b");
    assert_eq!(b["unreachable"], json!(true));
    let msg = b["msg"].as_str().unwrap();
    assert!(
        msg.contains("node pve2 is unreachable") && msg.contains("595"),
        "{msg}"
    );
    assert_eq!(
        (b["ha"].clone(), b["status"].clone()),
        (json!(null), json!(null))
    );
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .starts_with("1 of 2 VMs failed: b (102)"),
        "{r}"
    );

    let (r, code) = module(
        &sim,
        json!({"state": "started", "tags": ["ocp1"], "ignore_unreachable": true}),
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["changed"], json!(false));
    assert_eq!(r["totals"]["unreachable"], json!(1));
    assert!(r["warnings"][0].as_str().unwrap().contains("pve2"), "{r}");
}

#[test]
fn memory_overcommit_fails_that_vm_with_an_explanation() {
    let sim = start(
        seed("6G", &[(101, "a", "pve1", ""), (102, "b", "pve1", "")]),
        0.1,
    );
    let (r, code) = module(
        &sim,
        json!({"state": "started", "vms": [101, 102], "parallel": 1}),
    );
    assert_eq!(code, 1);
    assert_eq!(vm(&r, "a")["after"], json!("running"));
    let b = vm(&r, "b");
    let msg = b["msg"].as_str().unwrap();
    assert!(
        msg.contains("does not have enough free memory to start the VM"),
        "{msg}"
    );
    assert!(msg.contains("task log tail"), "{msg}");
    assert!(b["task_log"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().contains("Cannot allocate memory")));
    assert_eq!(r["totals"]["failed"], json!(1));
}

#[test]
fn injected_task_failure_reports_the_log_tail_and_others_complete() {
    let sim = start(
        seed("64G", &[(101, "a", "pve1", ""), (102, "b", "pve1", "")]),
        0.1,
    );
    sim.inject(Fault::FailTasks {
        kind: "qmstart".into(),
        vmid: Some(102),
        count: 1,
        message: "start failed: QEMU exited with code 1".into(),
    })
    .unwrap();
    let (r, code) = module(&sim, json!({"state": "started", "vms": ["a", "b"]}));
    assert_eq!(code, 1);
    assert_eq!(vm(&r, "a")["after"], json!("running"));
    let msg = vm(&r, "b")["msg"].as_str().unwrap().to_string();
    assert!(
        msg.contains(": start failed: start failed: QEMU exited with code 1"),
        "{msg}"
    );
    // The fault is used up: a rerun converges and leaves the running VM alone.
    let (r, code) = module(&sim, json!({"state": "started", "vms": ["a", "b"]}));
    assert_eq!(code, 0, "{r}");
    assert_eq!(vm(&r, "a")["changed"], json!(false));
    assert_eq!(vm(&r, "b")["changed"], json!(true));
}

#[test]
fn a_locked_vm_is_waited_for() {
    let sim = start(seed("64G", &[(101, "a", "pve1", "")]), 0.1);
    sim.inject(Fault::StaleLock {
        vmid: 101,
        lock: "backup".into(),
    })
    .unwrap();
    // Short task_timeout: the lock never clears, so the VM fails naming the lock, and nothing is sent.
    let (r, code) = module(
        &sim,
        json!({"state": "started", "vmid": 101, "task_timeout": 1}),
    );
    assert_eq!(code, 1);
    let msg = vms(&r)[0]["msg"].as_str().unwrap().to_string();
    assert!(msg.contains("lock") && msg.contains("backup"), "{msg}");
    assert!(power_posts(&sim).is_empty());
    // The backup finishes while the module waits: then it starts the VM.
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            sim.with_sim(|s| s.vms.get_mut(&101).unwrap().conf.remove("lock"));
        });
        let (r, code) = module(&sim, json!({"state": "started", "vmid": 101}));
        assert_eq!(code, 0, "{r}");
        assert_eq!(vms(&r)[0]["lock"], json!(null));
    });
    assert_eq!(power_posts(&sim), vec![(101, "start".into())]);
}

#[test]
fn remediation_starts_owned_vms_and_leaves_others() {
    let sim = start(
        seed(
            "64G",
            &[(101, "owned", "pve1", ""), (102, "foreign", "pve1", "")],
        ),
        0.1,
    );
    // Make 102 not ours: drop the ownership tag.
    sim.with_sim(|s| {
        s.vms
            .get_mut(&102)
            .unwrap()
            .conf
            .insert("tags".into(), "ocp1".into())
    });
    let (r, code) = module(&sim, json!({"state": "status", "tags": ["ocp1"]}));
    assert_eq!((code, r["changed"].clone()), (0, json!(false)), "{r}");
    assert!(sim.writes().is_empty());
    let (r, code) = module(
        &sim,
        json!({"state": "status", "tags": ["ocp1"], "remediate": true}),
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["changed"], json!(true));
    assert_eq!(power_posts(&sim), vec![(101, "start".into())]);
    assert_eq!(vm(&r, "foreign")["owned"], json!(false));
    assert!(!running(&sim, 102));
}

#[test]
fn works_over_tls_with_the_clusters_own_ca_and_refuses_an_unknown_one() {
    let dir = std::env::temp_dir().join(format!("vm_lifecycle-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("pve-ca.pem");
    let mut cfg = Config::with_seed(seed("64G", &[(101, "a", "pve1", "")]));
    cfg.options.time_scale = 0.1;
    cfg.tls = pvesim::Tls::Generated {
        ca_path: Some(ca.clone()),
    };
    let sim = Simulator::start(cfg).unwrap();
    assert!(sim.url().starts_with("https://"));

    let (r, code) = module(&sim, json!({"state": "status", "vmid": 101}));
    assert_eq!(code, 1, "the simulator's CA is not trusted by default: {r}");
    let msg = r["msg"].as_str().unwrap();
    assert!(msg.contains("cannot list the cluster's VMs"), "{msg}");
    assert!(msg.contains("invalid peer certificate"), "{msg}");
    assert!(sim.writes().is_empty());

    let (r, code) = module(
        &sim,
        json!({"state": "started", "vmid": 101, "ca_path": ca.to_str().unwrap()}),
    );
    assert_eq!(code, 0, "{r}");
    assert!(running(&sim, 101));
    std::fs::remove_dir_all(&dir).ok();
}

/// A running LXC container that shares the VMs' tags: `tags` selects only the VM, a vmid of the
/// container is refused naming it, and nothing is sent to the container.
#[test]
fn a_container_is_never_acted_on() {
    let mut seed = seed("64G", &[(101, "a", "pve1", "running: true")]);
    seed.cts = Seed::from_yaml(
        "cts:\n  - {vmid: 150, node: pve1, running: true, config: {hostname: ct-a, \
         tags: 'ocp1;proxshift', rootfs: 'local-lvm:vm-150-disk-0,size=4G'}}\n",
    )
    .unwrap()
    .cts;
    seed.nodes[0].storages = Seed::lab().nodes[0].storages.clone();
    let sim = start(seed, 0.0);
    let (r, code) = module(&sim, json!({"state": "stopped", "vmid": 150}));
    assert_ne!(code, 0, "{r}");
    let msg = r["msg"].as_str().unwrap_or_default();
    assert!(
        msg.contains("vmid 150 is the LXC container 'ct-a' on node 'pve1'"),
        "{msg}"
    );
    let (r, code) = module(&sim, json!({"state": "stopped", "tags": ["proxshift"]}));
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        vms(&r)
            .iter()
            .map(|v| v["vmid"].clone())
            .collect::<Vec<_>>(),
        [json!(101)]
    );
    assert!(
        !sim.writes().iter().any(|w| w.path.contains("/150")),
        "{:?}",
        sim.writes()
    );
    assert!(sim.with_sim(|s| s.cts[&150].running));
}

/// Certificate checking off (`validate_certs: false`, or `PROXMOX_VALIDATE_CERTS=false`) is said, as the
/// Vault and Kubernetes modules say it (#43).
#[test]
fn validate_certs_false_warns() {
    let sim = start(seed("8G", &[(101, "a", "pve1", "")]), 1.0);
    let (r, code) = module(
        &sim,
        json!({"state": "started", "tags": ["none-such"], "validate_certs": false}),
    );
    assert_eq!(code, 0, "{r}");
    assert!(
        r["warnings"]
            .to_string()
            .contains("certificate is not verified"),
        "{r}"
    );
    let (r, _) = module(&sim, json!({"state": "started", "tags": ["none-such"]}));
    assert!(
        !r["warnings"]
            .to_string()
            .contains("certificate is not verified"),
        "{r}"
    );
}
