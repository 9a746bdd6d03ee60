//! A rehearsal's files, all in one folder (`--out`, default `.proxshift/rehearse/CLUSTER`): the
//! simulator's seed and CA, the vars file the playbook reads, the flow's work folder and pvesim's
//! final state; and a pvesim seed given with `--seed`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::commands::Sim;
use super::seed::{seed_yaml, Identity};
use crate::exit::CliError;

/// Placeholder install secrets for a rehearsal: well-formed, valid nowhere.
const PLACEHOLDER_PULL_SECRET: &str =
    r#"{"auths":{"rehearsal.invalid":{"auth":"cmVoZWFyc2FsOnBsYWNlaG9sZGVy"}}}"#;
const PLACEHOLDER_SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA proxshift-rehearsal";

fn io_err(what: &str, path: &Path, e: std::io::Error) -> CliError {
    CliError::inventory(format!("cannot {what} {}: {e}", path.display()))
}

/// The rehearsal's folder.
pub(crate) struct Files {
    pub(crate) dir: PathBuf,
}

impl Files {
    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Where the simulator listens (`listen`) and keeps its files.
    pub(crate) fn sim(&self, listen: &str) -> Sim {
        Sim {
            listen: listen.to_string(),
            seed_file: self.path("pvesim-seed.yaml"),
            ca_file: self.path("pvesim-ca.pem"),
            work_dir: self.path("clusters"),
        }
    }

    /// The extra-vars file the playbook is given with `-e @FILE`.
    pub(crate) fn vars_file(&self) -> String {
        self.path("rehearsal-vars.json")
    }

    /// Where pvesim dumps its state when it stops.
    pub(crate) fn final_state_file(&self) -> String {
        self.path("pvesim-state.yaml")
    }

    /// Write the seed and the vars file: the simulator's throwaway token (it outranks an inventory
    /// value, so no real secret is used) and, with `placeholder`, install secrets valid nowhere and no
    /// Vault record.
    pub(crate) fn write(
        &self,
        cluster: &str,
        seed: &Value,
        sim: &Sim,
        who: &Identity,
        placeholder: bool,
    ) -> Result<(), CliError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| io_err("create", &self.dir, e))?;
        std::fs::write(&sim.seed_file, seed_yaml(cluster, seed))
            .map_err(|e| io_err("write", Path::new(&sim.seed_file), e))?;
        let mut vars = json!({
            "proxmox_api_token_secret": who.secret,
            "proxmox_api_password": null,
        });
        if placeholder {
            vars["secrets_values"] =
                json!({"pull_secret": PLACEHOLDER_PULL_SECRET, "ssh_key": PLACEHOLDER_SSH_KEY});
            // No Vault in this rehearsal: the cluster's record is not read (the simulated cluster is new).
            vars["proxshift_record_store"] = json!(false);
        }
        let vars_file = self.vars_file();
        std::fs::write(&vars_file, vars.to_string())
            .map_err(|e| io_err("write", Path::new(&vars_file), e))
    }

    /// Forget what an earlier rehearsal left: the flow's work folder and pvesim's final state.
    pub(crate) fn clear_previous(&self) {
        let _ = std::fs::remove_dir_all(self.dir.join("clusters"));
        let _ = std::fs::remove_file(self.final_state_file());
    }

    /// pvesim's final state, which says what the run created.
    pub(crate) fn read_final_state(&self) -> Result<Value, CliError> {
        let dump = self.final_state_file();
        std::fs::read_to_string(&dump)
            .ok()
            .and_then(|t| serde_yaml_ng::from_str(&t).ok())
            .ok_or_else(|| {
                CliError::tool(format!(
                    "pvesim wrote no final state to {dump}: the rehearsal's result is unknown"
                ))
            })
    }
}

/// A pvesim seed given with `--seed`, as it is in the file.
pub(crate) fn read_seed_file(file: &Path) -> Result<Value, CliError> {
    let text = std::fs::read_to_string(file).map_err(|e| io_err("read", file, e))?;
    serde_yaml_ng::from_str(&text)
        .map_err(|e| CliError::inventory(format!("{} is not a pvesim seed: {e}", file.display())))
}
