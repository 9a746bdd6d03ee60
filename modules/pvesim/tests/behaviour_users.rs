//! `POST /access/users` and `GET /access/users/{userid}`: what `proxmox_access` needs to create
//! the least-privilege user, with upstream's permission checks (Realm.AllocateUser on the realm).

mod common;

use common::{start, Api};

#[test]
fn users_can_be_created_read_and_given_tokens() {
    let sim = start();
    let api = Api::root(&sim);
    api.post(
        "/access/users",
        &[
            ("userid", "prov@pve"),
            ("password", "long-enough-pw"),
            ("expire", "0"),
        ],
    )
    .ok();
    let u = api.get("/access/users/prov@pve", &[]).ok().clone();
    assert_eq!(u["enable"], 1);
    assert_eq!(u["tokens"], serde_json::json!({}));
    api.post("/access/users/prov@pve/token/t1", &[("privsep", "1")])
        .ok();
    let u = api.get("/access/users/prov@pve", &[]).ok().clone();
    assert_eq!(u["tokens"]["t1"]["privsep"], 1);
    // The new user can log in with its password.
    assert!(Api::login(&sim, "prov@pve", "long-enough-pw").is_some());

    let again = api.post("/access/users", &[("userid", "prov@pve")]);
    assert_eq!(again.status, 500);
    assert_eq!(
        again.message(),
        "create user failed: user 'prov@pve' already exists\n"
    );
    let realm = api.post("/access/users", &[("userid", "x@nowhere")]);
    assert_eq!(
        realm.message(),
        "create user failed: domain 'nowhere' does not exist\n"
    );
    let short = api.post(
        "/access/users",
        &[("userid", "y@pve"), ("password", "short")],
    );
    assert_eq!(short.status, 400, "{:?}", short.body);
    let missing = api.get("/access/users/ghost@pve", &[]);
    assert_eq!(missing.message(), "no such user ('ghost@pve')\n");
}

#[test]
fn creating_users_needs_realm_allocate_user() {
    let sim = start();
    // The lab's privilege-separated token has VM privileges only.
    let limited = Api::token(&sim, pvesim::lab::CI_TOKEN);
    let r = limited.post("/access/users", &[("userid", "sneaky@pve")]);
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert!(
        r.message()
            .contains("/access/realm/pve, Realm.AllocateUser"),
        "{}",
        r.message()
    );
    assert_eq!(
        Api::root(&sim).get("/access/users/sneaky@pve", &[]).status,
        500
    );
}

/// `PVE/API2/Role.pm` (the same in PVE 8 and 9): the `PVE` namespace is a parameter error, the
/// built-in roles are "auto-generated", and what fails inside `lock_user_config` carries its prefix.
#[test]
fn role_errors_are_upstreams() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post("/access/roles", &[("roleid", "PVEMine")]);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"]["roleid"],
        "cannot use role ID starting with the (case-insensitive) 'PVE' namespace"
    );
    api.post(
        "/access/roles",
        &[("roleid", "Mine"), ("privs", "VM.Audit")],
    )
    .ok();
    let r = api.post("/access/roles", &[("roleid", "Mine")]);
    assert_eq!(
        r.message(),
        "create role failed: role 'Mine' already exists\n"
    );
    let r = api.put("/access/roles/Nope", &[("privs", "VM.Audit")]);
    assert_eq!(
        r.message(),
        "update role failed: role 'Nope' does not exist\n"
    );
    let r = api.put("/access/roles/PVEAuditor", &[("privs", "VM.Audit")]);
    assert_eq!(
        r.message(),
        "auto-generated role 'PVEAuditor' cannot be modified\n"
    );
    let r = api.delete("/access/roles/PVEAuditor", &[]);
    assert_eq!(
        r.message(),
        "auto-generated role 'PVEAuditor' cannot be deleted\n"
    );
    let r = api.delete("/access/roles/Nope", &[]);
    assert_eq!(
        r.message(),
        "delete role failed: role 'Nope' does not exist\n"
    );
}
