//! proxmox_access end to end against an in-process pvesim (the lab seed): the real module body,
//! through the Ansible protocol layer, creates the objects; the new token is then used for real.

use module_testkit::TestModule;
use pvesim::{lab, Config, SimHandle, Simulator};
use serde_json::{json, Value};

const PRIVS: [&str; 4] = ["VM.Audit", "VM.PowerMgmt", "Datastore.Audit", "Sys.Audit"];

fn module(sim: &SimHandle, args: Value, check: bool) -> (Value, i32) {
    module_as(sim, args, check, lab::ROOT_TOKEN)
}

/// Run the module with the token `id=secret`, as Ansible would minus the process boundary.
fn module_as(sim: &SimHandle, mut args: Value, check: bool, token: &str) -> (Value, i32) {
    let (id, secret) = token.split_once('=').unwrap();
    args["api_host"] = json!(sim.url());
    args["api_token_id"] = json!(id);
    args["api_token_secret"] = json!(secret);
    args["_ansible_check_mode"] = json!(check);
    args["_ansible_diff"] = json!(true);
    TestModule::new(
        "proxmox_access",
        proxmox_access::argument_spec(),
        proxmox_access::run,
    )
    .hiding(lab::ROOT_TOKEN_SECRET)
    .run(&args)
}

fn args() -> Value {
    json!({"role": "ProxShiftTest", "privileges": PRIVS, "user": "prov@pve", "token": "ci2"})
}

fn get(sim: &SimHandle, token: &str, path: &str) -> u16 {
    let url = format!("{}{path}", sim.api_url());
    match ureq_get(&url, token) {
        Ok(s) | Err(s) => s,
    }
}

/// A GET with a token, returning the HTTP status (no extra HTTP client dependency: std only).
fn ureq_get(url: &str, token: &str) -> Result<u16, u16> {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: PVEAPIToken={token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status: u16 = out[9..12].parse().unwrap();
    if status == 200 {
        Ok(status)
    } else {
        Err(status)
    }
}

#[test]
fn creates_converges_and_removes_least_privilege_access() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();

    // Check mode: says what it would do, writes nothing, returns no secret.
    let (r, code) = module(&sim, args(), true);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["changed"], true);
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert!(r.get("token_secret").is_none());
    assert_eq!(r["actions"].as_array().unwrap().len(), 5, "{r}");
    assert_eq!(r["diff"]["after"]["role"]["roleid"], "ProxShiftTest");

    let (r, code) = module(&sim, args(), false);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["changed"], true);
    let secret = r["token_secret"]
        .as_str()
        .expect("secret on creation")
        .to_string();
    assert_eq!(r["token"]["full_tokenid"], "prov@pve!ci2");
    assert_eq!(r["token"]["privsep"], true);
    assert_eq!(
        r["acls"],
        json!([
            {"path": "/", "type": "user", "ugid": "prov@pve", "roleid": "ProxShiftTest", "propagate": true},
            {"path": "/", "type": "token", "ugid": "prov@pve!ci2", "roleid": "ProxShiftTest", "propagate": true}
        ])
    );

    // The token works for what the role grants and nothing else.
    let tok = format!("prov@pve!ci2={secret}");
    assert_eq!(get(&sim, &tok, "/nodes/pve1/qemu/100/config"), 200);
    assert_eq!(get(&sim, &tok, "/nodes/pve1/status"), 200);
    assert_eq!(get(&sim, &tok, "/access/users/root@pam"), 403);

    // Rerun: nothing to do, no secret, no write.
    let before = sim.writes().len();
    let (r, _) = module(&sim, args(), false);
    assert_eq!(r["changed"], false, "{r}");
    assert!(r.get("token_secret").is_none());
    assert_eq!(sim.writes().len(), before);

    // Drift in the role's privileges is put back exactly.
    let mut narrower = args();
    narrower["privileges"] = json!(["VM.Audit"]);
    let (r, _) = module(&sim, narrower, false);
    assert_eq!(
        r["actions"],
        json!(["set the privileges of role ProxShiftTest to VM.Audit"])
    );
    assert_eq!(get(&sim, &tok, "/nodes/pve1/status"), 403);

    // Unknown privileges are refused before anything is written.
    let mut bad = args();
    bad["privileges"] = json!(["VM.Audit", "VM.Teleport"]);
    let before = sim.writes().len();
    let (r, code) = module(&sim, bad, false);
    assert_eq!(code, 1);
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("'VM.Teleport' is not a privilege"),
        "{r}"
    );
    assert_eq!(sim.writes().len(), before);

    // absent: ACLs, token, role gone; the user stays.
    let mut gone = args();
    gone["state"] = json!("absent");
    let (r, code) = module(&sim, gone.clone(), false);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["role"], Value::Null);
    assert_eq!(r["token"], Value::Null);
    assert_eq!(get(&sim, &tok, "/version"), 401);
    let (r, _) = module(&sim, gone, false);
    assert_eq!(r["changed"], false);
}

#[test]
fn a_connection_without_user_admin_rights_gets_a_clear_message() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    // The lab's privilege-separated CI token has VM privileges only.
    let (r, code) = module_as(&sim, args(), false, lab::CI_TOKEN);
    assert_eq!(code, 1, "{r}");
    let msg = r["msg"].as_str().unwrap();
    assert!(msg.contains("Permission check failed"), "{msg}");
    assert!(msg.contains("root@pam or an administrator token"), "{msg}");
}

/// The least-privilege role of `playbooks/proxmox_access.yaml` names PVE 9's guest agent
/// privilege; PVE 8 knows `VM.Monitor` instead (pve-access-control `$privgroups`) and refuses the
/// other name. The module asks each release in its own names, says so, and converges.
#[test]
fn the_guest_agent_privilege_is_named_as_the_release_names_it() {
    for (v, agent_priv, warned) in [
        ("8.4.1", "VM.Monitor", true),
        ("9.2.11", "VM.GuestAgent.Audit", false),
    ] {
        let mut seed = pvesim::Seed::lab();
        seed.cluster.version = v.into();
        let sim = Simulator::start(Config::with_seed(seed)).unwrap();
        let mut a = args();
        a["privileges"] = json!(["VM.Audit", "VM.GuestAgent.Audit", "Sys.Audit"]);
        let (r, code) = module(&sim, a.clone(), false);
        assert_eq!(code, 0, "PVE {v}: {r}");
        let role = sim.with_sim(|s| s.access.roles["ProxShiftTest"].clone());
        let want: std::collections::BTreeSet<String> = ["Sys.Audit", "VM.Audit", agent_priv]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(role, want, "PVE {v}");
        let warnings = r["warnings"].to_string();
        assert_eq!(
            warnings.contains("no 'VM.GuestAgent.Audit'"),
            warned,
            "PVE {v}: {r}"
        );
        let (r, code) = module(&sim, a, false);
        assert_eq!(
            (code, r["changed"].clone()),
            (0, json!(false)),
            "PVE {v}: {r}"
        );
    }
}
