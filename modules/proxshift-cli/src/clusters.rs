//! `proxshift clusters`: the clusters of the inventory as a table or JSON, with live VM states.

use std::io::IsTerminal;

use crate::app::{env_var, print_json, read_inventory, tool, Project};
use crate::cli::Global;
use crate::exit::{self, CliError};
use crate::live::{self, LiveReport, PveSource, VmSource};
use crate::plan;
use crate::report;
use crate::style::use_colour;

/// `proxshift clusters`: the inventory's clusters, with each host's VM state when Proxmox is reachable.
pub(crate) fn run(g: &Global, proj: &Project, hosts: bool, no_live: bool) -> Result<i32, CliError> {
    if g.check || g.diff {
        return Err(CliError::usage(
            "--check and --diff apply to commands that run a playbook, not to clusters",
        ));
    }
    if g.dry_run {
        let program =
            tool("ansible-inventory", &proj.root).unwrap_or_else(|| "ansible-inventory".into());
        let cmd = plan::inventory_command(&program, &proj.inventory);
        if g.json {
            print_json(&report::dry_run_json(None, &cmd));
        } else {
            print!("{}", report::dry_run_text(&cmd));
        }
        return Ok(exit::OK);
    }
    let (_, mut inv) = read_inventory(g, proj)?;
    let live = if no_live {
        LiveReport::disabled("--no-live")
    } else {
        match live::connection(&inv.proxmox, &env_var) {
            Err(why) => LiveReport::disabled(why.to_string()),
            Ok(opts) => {
                let fetched = PveSource::new(&opts).and_then(|src| {
                    let vms = src.vms()?;
                    Ok((src.describe(), vms))
                });
                match fetched {
                    Ok((source, vms)) => {
                        live::attach(&mut inv.clusters, &vms);
                        LiveReport {
                            status: "ok".into(),
                            source: Some(source),
                            message: None,
                        }
                    }
                    Err(e) => LiveReport {
                        status: "error".into(),
                        source: opts.base_url().ok(),
                        message: Some(e.to_string()),
                    },
                }
            }
        }
    };
    if g.json {
        print_json(&report::clusters_json(&inv.clusters, &live));
    } else {
        let colour = use_colour(g.color, std::io::stdout().is_terminal(), &env_var);
        print!(
            "{}",
            report::clusters_text(&inv.clusters, &live, hosts, colour)
        );
    }
    Ok(exit::OK)
}
