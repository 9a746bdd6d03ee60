//! The two commands of a rehearsal: `pvesim …` and the `ansible-playbook …` that runs `site.yaml`'s
//! first phases against it, with every Proxmox setting pointed at the simulator. Pure.

use super::seed::Identity;
use crate::command::Command;

/// The phases a rehearsal runs: everything up to starting the VMs. Nothing in them writes outside
/// the simulator (secrets are only read; credentials, install and ACM are left out).
pub const REHEARSE_TAGS: [&str; 5] = ["preflight", "secrets", "manifests", "vms", "start"];

/// Where the simulator listens and keeps its files during a rehearsal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sim {
    pub listen: String,
    pub seed_file: String,
    pub ca_file: String,
    pub work_dir: String,
}

/// `pvesim …` and the `ansible-playbook …` run against it. Inventory values are overridden with
/// extra vars (they outrank the inventory), so nothing points at the real Proxmox.
pub fn commands(
    cluster: &str,
    who: &Identity,
    sim: &Sim,
    ansible: &crate::plan::RunOptions,
) -> (Command, Command) {
    let pvesim = Command::new("pvesim").args([
        "--listen",
        &sim.listen,
        "--seed",
        &sim.seed_file,
        "--tls",
        "--ca-out",
        &sim.ca_file,
        "--time-scale",
        "0",
        "--auth-delay-ms",
        "0",
    ]);
    let mut plan = crate::plan::plan(
        &crate::plan::Action::Provision {
            force: false,
            only: vec![REHEARSE_TAGS.join(",")],
            skip: vec![],
        },
        Some(cluster),
    )
    .expect("fixed phases are valid");
    plan.command = "rehearse";
    plan.extra_vars = vec![
        ("proxmox_api_host".into(), format!("https://{}", sim.listen)),
        ("proxmox_api_user".into(), who.user.clone()),
        ("proxmox_api_token_id".into(), who.token.clone()),
        ("proxmox_validate_certs".into(), "true".into()),
        ("proxmox_ca_path".into(), sim.ca_file.clone()),
        ("proxshift_work_dir".into(), sim.work_dir.clone()),
    ];
    let mut opts = ansible.clone();
    opts.env
        .push(("PROXMOX_TOKEN_SECRET".into(), who.secret.clone()));
    (pvesim, crate::plan::playbook_command(&plan, &opts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::seed::tests::who;

    #[test]
    fn commands_point_only_at_the_simulator() {
        let sim = Sim {
            listen: "127.0.0.1:18006".into(),
            seed_file: "/w/seed.yaml".into(),
            ca_file: "/w/ca.pem".into(),
            work_dir: "/w/clusters".into(),
        };
        let opts = crate::plan::RunOptions {
            program: "ansible-playbook".into(),
            inventory: "inventory/".into(),
            playbooks_dir: "playbooks".into(),
            ..Default::default()
        };
        let (pvesim, play) = commands("lab-sno", &who(), &sim, &opts);
        assert_eq!(
            pvesim.shell(),
            "pvesim --listen 127.0.0.1:18006 --seed /w/seed.yaml --tls --ca-out /w/ca.pem --time-scale 0 --auth-delay-ms 0"
        );
        assert_eq!(
            play.shell(),
            "PROXMOX_TOKEN_SECRET=sim-secret ansible-playbook -i inventory/ playbooks/site.yaml -e cluster_name=lab-sno \
             -e proxmox_api_host=https://127.0.0.1:18006 -e proxmox_api_user=proxshift@pve -e proxmox_api_token_id=ansible \
             -e proxmox_validate_certs=true -e proxmox_ca_path=/w/ca.pem -e proxshift_work_dir=/w/clusters \
             --tags preflight,secrets,manifests,vms,start"
        );
    }
}
