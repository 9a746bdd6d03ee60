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
