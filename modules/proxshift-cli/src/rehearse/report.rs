//! The rehearsal's result as the operator sees it: the report (also its JSON shape) and its text.

use serde::Serialize;

use super::layout::{Created, Problem};

/// The whole rehearsal's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cluster: String,
    /// Where the layout came from: `proxmox (https://…)`, `inventory proxmox_layout` or `seed FILE`.
    pub layout_source: String,
    /// `ok` (the run would succeed) or `failed`.
    pub status: String,
    pub ansible_rc: Option<i32>,
    pub exit_code: i32,
    pub created: Vec<Created>,
    pub problems: Vec<Problem>,
    pub seed_file: String,
    pub work_dir: String,
}

pub fn report_text(r: &Report) -> String {
    let mut s = String::new();
    let verdict = if r.status == "ok" {
        "would succeed"
    } else {
        "would fail"
    };
    s.push_str(&format!(
        "Rehearsal of {} on a copy of {}: the run {verdict}.\n",
        r.cluster, r.layout_source
    ));
    if r.created.is_empty() {
        s.push_str("\nNo VM would be created.\n");
    } else {
        let mut t = crate::table::Table::new(["VM", "NODE", "VMID", "GIB", "MACS", "STATE"]);
        for c in &r.created {
            t.row(vec![
                c.name.clone().into(),
                c.node.clone().into(),
                c.vmid.to_string().into(),
                format!("{:.1}", c.memory_mib as f64 / 1024.0).into(),
                c.macs.join(",").into(),
                if c.running { "running" } else { "stopped" }.into(),
            ]);
        }
        s.push_str("\nWould create:\n");
        s.push_str(&t.render(false));
    }
    if r.problems.is_empty() {
        s.push_str("\nNo problems found.\n");
    } else {
        s.push_str(&format!("\nWould fail or clash ({}):\n", r.problems.len()));
        for p in &r.problems {
            s.push_str(&format!("- [{}] {} ({})\n", p.kind, p.message, p.source));
        }
    }
    s.push_str(&format!(
        "\nNothing was written to Proxmox. Simulator seed: {}; rehearsal files: {}\n",
        r.seed_file, r.work_dir
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::layout::problem;

    #[test]
    fn report_text_lists_vms_and_problems() {
        let r = Report {
            cluster: "demo".into(),
            layout_source: "seed demo/pvesim-seed.yaml".into(),
            status: "failed".into(),
            ansible_rc: Some(2),
            exit_code: 1,
            created: vec![Created {
                name: "demo-master-0".into(),
                vmid: 4100,
                node: "pve1".into(),
                memory_mib: 24576,
                macs: vec!["BC:24:11:00:00:01".into()],
                running: true,
            }],
            problems: vec![problem(
                "memory",
                "layout",
                "node pve3 is overcommitted".into(),
            )],
            seed_file: "/w/seed.yaml".into(),
            work_dir: "/w".into(),
        };
        let t = report_text(&r);
        assert!(
            t.starts_with(
                "Rehearsal of demo on a copy of seed demo/pvesim-seed.yaml: the run would fail."
            ),
            "{t}"
        );
        assert!(t.contains("demo-master-0  pve1"), "{t}");
        assert!(
            t.contains("- [memory] node pve3 is overcommitted (layout)"),
            "{t}"
        );
        assert!(t.contains("Nothing was written to Proxmox"));
    }
}
