//! The PVE release pvesim plays: seeded, reported by `/version` and the node status.

mod common;

use common::{start, start_seed, Api};
use pvesim::{Generation, PveVersion, Seed};

#[test]
fn seeded_version_reaches_version_endpoint_and_ops() {
    let mut seed = Seed::lab();
    seed.cluster.version = "8.4.1".into();
    let sim = start_seed(seed);
    let v = Api::root(&sim).get("/version", &[]);
    assert_eq!(v.ok()["version"], "8.4.1");
    assert_eq!(v.ok()["release"], "8.4");
    let status = Api::root(&sim).get("/nodes/pve1/status", &[]);
    assert!(status.ok()["pveversion"]
        .as_str()
        .unwrap()
        .starts_with("pve-manager/8.4.1/"));
    assert_eq!(sim.with_sim(|s| s.version.generation()), Generation::Pve8);
}

#[test]
fn default_is_the_current_9x() {
    let sim = start();
    assert_eq!(
        Api::root(&sim).get("/version", &[]).ok()["version"],
        "9.2.11"
    );
    assert_eq!(sim.with_sim(|s| s.version), PveVersion::CURRENT);
    assert_eq!(PveVersion::CURRENT.generation(), Generation::Pve9);
}

#[test]
fn unsupported_seed_version_is_refused() {
    let mut seed = Seed::lab();
    seed.cluster.version = "7.4".into();
    let err = pvesim::Simulator::start(pvesim::Config::with_seed(seed))
        .err()
        .expect("7.4 is refused");
    assert!(
        matches!(
            &err,
            pvesim::StartError::Seed(pvesim::SeedError::Version(_))
        ),
        "{err}"
    );
}

/// Error replies as each release's pve-http-server and pve-common word them (see
/// `Sim::error_message_in_body`, `schema::requires_text`, `schema::release_wording`).
mod error_bodies {
    use super::common::{raw, start_version, Api, BOTH_VERSIONS, ROOT_TOKEN};
    use serde_json::json;

    /// `message` joined the JSON error body with libpve-http-server-perl 5.2.0 (pve-manager
    /// 8.3.4); the reason phrase carries the text in every release.
    #[test]
    fn message_field_from_pve_8_3_4_reason_phrase_always() {
        for (v, with_message) in [
            ("8.3.3", false),
            ("8.3.4", true),
            ("8.4.1", true),
            ("9.2.11", true),
        ] {
            let sim = start_version(v);
            let r = Api::root(&sim).get("/nodes/pve1/qemu/999/config", &[]);
            assert_eq!(r.status, 500, "PVE {v}");
            let expected = if with_message {
                json!({"data": null, "message": "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\n"})
            } else {
                json!({"data": null})
            };
            assert_eq!(r.body, expected, "PVE {v}");
            let resp = raw(
                &sim,
                &format!("GET /api2/json/nodes/pve1/qemu/999/config HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken={ROOT_TOKEN}\r\nConnection: close\r\n\r\n"),
            );
            assert!(
                resp.starts_with("HTTP/1.1 500 Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\r\n"),
                "PVE {v}: {resp}"
            );
            // Parameter errors carry `errors` either way.
            let r = Api::root(&sim).post("/nodes/pve1/qemu", &[("vmid", "x")]);
            assert_eq!(r.status, 400, "PVE {v}");
            assert_eq!(
                r.body["errors"]["vmid"], "type check ('integer') failed - got 'x'",
                "PVE {v}"
            );
            assert_eq!(r.body.get("message").is_some(), with_message, "PVE {v}");
        }
    }

    /// A parameter given without the one it `requires` (qemu-server's config `force` needs
    /// `delete`, a role update's `append` needs `privs`): the error is filed under the missing
    /// one, in the release's words (pve-common 9.0.8 reworded it).
    #[test]
    fn missing_required_companion_is_worded_per_release() {
        for v in BOTH_VERSIONS {
            let sim = start_version(v);
            let api = Api::root(&sim);
            let (force, append) = if v.starts_with('8') {
                (
                    "missing property - 'force' requires this property",
                    "missing property - 'append' requires this property",
                )
            } else {
                (
                    "missing property required by 'force'",
                    "missing property required by 'append'",
                )
            };
            let r = api.put("/nodes/pve2/qemu/101/config", &[("force", "1")]);
            assert_eq!(r.status, 400, "PVE {v}: {:?}", r.body);
            assert_eq!(r.error("delete"), force, "PVE {v}");
            assert_eq!(r.message(), "Parameter verification failed.\n");
            let r = api.put("/access/roles/ProxShiftProvisioner", &[("append", "1")]);
            assert_eq!(r.error("privs"), append, "PVE {v}: {:?}", r.body);
            // With its companion the request goes through.
            let r = api.put(
                "/nodes/pve2/qemu/101/config",
                &[("force", "1"), ("delete", "description")],
            );
            assert_eq!(r.status, 200, "PVE {v}: {:?}", r.body);
        }
    }

    /// A one-character storage ID: "contains illegal characters" until pve-common 9.1.7 (fix
    /// #7077, pve-manager 9.1.7) says it "cannot be shorter than 2 characters".
    #[test]
    fn one_character_storage_id_is_worded_per_release() {
        for (v, why) in [
            ("8.4.1", "contains illegal characters"),
            ("9.1.6", "contains illegal characters"),
            ("9.1.7", "cannot be shorter than 2 characters"),
            ("9.2.11", "cannot be shorter than 2 characters"),
        ] {
            let sim = start_version(v);
            let r = Api::root(&sim).get("/nodes/pve1/storage/x/content", &[]);
            assert_eq!(r.status, 400, "PVE {v}: {:?}", r.body);
            assert_eq!(
                r.error("storage"),
                format!("invalid format - storage ID 'x' {why}"),
                "PVE {v}"
            );
            // Longer invalid IDs keep the old text everywhere.
            let r = Api::root(&sim).get("/nodes/pve1/storage/1x/content", &[]);
            assert_eq!(
                r.error("storage"),
                "invalid format - storage ID '1x' contains illegal characters",
                "PVE {v}"
            );
        }
    }
}
