//! Which VMs a task is about, and in which steps they are handled. Pure: works on the cluster listing.

use serde_json::Value;

use crate::model::Inventory;

/// Why the VMs a task names cannot be found or ordered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("{what}: {n} is not a valid vmid")]
    InvalidVmid { what: String, n: String },
    #[error("{what}: empty VM name")]
    EmptyName { what: String },
    #[error("{what}: expected a vmid or a VM name, got {got}")]
    NotARef { what: String, got: String },
    /// `reference` as [`Ref::describe`] puts it.
    #[error("no VM with {reference} exists in the cluster")]
    NoSuchVm { reference: String },
    #[error("{reference} matches {} VMs ({}); use vmid to say which", .vms.len(), .vms.join(", "))]
    Ambiguous { reference: String, vms: Vec<String> },
    #[error("VM {vmid} is named '{actual}', not '{given}'; vmid and name must name the same VM")]
    NameMismatch {
        vmid: u32,
        actual: String,
        given: String,
    },
    #[error("one of vmid, name, vms or tags is required")]
    NothingNamed,
    /// Every `vms` item that failed.
    #[error("vms: {}", join(.0))]
    List(Vec<TargetError>),
    #[error(
        "vmid {vmid} is the LXC container '{name}' on node '{node}', not a QEMU VM: vm_lifecycle \
         acts on QEMU VMs only and leaves containers alone"
    )]
    Container {
        vmid: u32,
        name: String,
        node: String,
    },
    #[error("{0} is a template; templates have no power state")]
    Template(String),
    #[error("order[{i}]: {reference} is not one of the VMs this task acts on")]
    NotATarget { i: usize, reference: String },
    #[error("order[{i}]: {reference} matches several target VMs; use vmids")]
    SeveralTargets { i: usize, reference: String },
    #[error("order[{i}]: {vm} appears in order more than once")]
    Repeated { i: usize, vm: String },
}

/// Errors as one line, `; ` between them.
pub(crate) fn join<E: std::fmt::Display>(errors: &[E]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// How the user named the VMs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `vmid` and/or `name`.
    One {
        vmid: Option<u32>,
        name: Option<String>,
    },
    /// `vms`: each a vmid or a name.
    List(Vec<Ref>),
    /// `tags`: every (non-template) VM carrying all of them.
    Tags(Vec<String>),
}

/// A reference to one VM: by vmid or by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    Id(u32),
    Name(String),
}

impl Ref {
    /// A list item from the task: an integer or all-digit string is a vmid, anything else a name
    /// (Proxmox names are DNS names, which cannot be all digits... in practice).
    pub fn parse(v: &Value, what: &str) -> Result<Ref, TargetError> {
        match v {
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Ref::Id)
                .ok_or_else(|| TargetError::InvalidVmid {
                    what: what.to_string(),
                    n: n.to_string(),
                }),
            Value::String(s) if s.trim().is_empty() => Err(TargetError::EmptyName {
                what: what.to_string(),
            }),
            Value::String(s) => Ok(match s.trim().parse::<u32>() {
                Ok(id) => Ref::Id(id),
                Err(_) => Ref::Name(s.trim().to_string()),
            }),
            other => Err(TargetError::NotARef {
                what: what.to_string(),
                got: other.to_string(),
            }),
        }
    }

    fn describe(&self) -> String {
        match self {
            Ref::Id(id) => format!("vmid {id}"),
            Ref::Name(n) => format!("name '{n}'"),
        }
    }

    fn matches(&self, vm: &Inventory) -> bool {
        match self {
            Ref::Id(id) => vm.vmid == *id,
            Ref::Name(n) => vm.name == *n,
        }
    }
}

/// Find exactly one VM for a reference; several VMs with one name is an error that lists them.
/// Containers are never found: a name does not match them, a vmid of one is refused.
fn find_one<'a>(inv: &'a [Inventory], r: &Ref) -> Result<&'a Inventory, TargetError> {
    let hits: Vec<&Inventory> = inv
        .iter()
        .filter(|vm| !vm.container && r.matches(vm))
        .collect();
    match hits.as_slice() {
        [] => Err(match inv.iter().find(|v| v.container && r.matches(v)) {
            Some(ct) if matches!(r, Ref::Id(_)) => TargetError::Container {
                vmid: ct.vmid,
                name: ct.name.clone(),
                node: ct.node.clone(),
            },
            _ => TargetError::NoSuchVm {
                reference: r.describe(),
            },
        }),
        [one] => Ok(one),
        many => Err(TargetError::Ambiguous {
            reference: r.describe(),
            vms: many
                .iter()
                .map(|v| format!("{} on {}", v.vmid, v.node))
                .collect(),
        }),
    }
}

/// Resolve the selector against the cluster listing. The result keeps the user's order (for `vms`)
/// or vmid order (for `tags`), without duplicates.
pub fn resolve(inv: &[Inventory], sel: &Selector) -> Result<Vec<Inventory>, TargetError> {
    let mut out: Vec<Inventory> = Vec::new();
    let mut push = |vm: &Inventory| {
        if !out.iter().any(|v| v.vmid == vm.vmid) {
            out.push(vm.clone());
        }
    };
    match sel {
        Selector::One { vmid, name } => {
            let vm = match (vmid, name) {
                (Some(id), Some(n)) => {
                    let vm = find_one(inv, &Ref::Id(*id))?;
                    if vm.name != *n {
                        return Err(TargetError::NameMismatch {
                            vmid: *id,
                            actual: vm.name.clone(),
                            given: n.clone(),
                        });
                    }
                    vm
                }
                (Some(id), None) => find_one(inv, &Ref::Id(*id))?,
                (None, Some(n)) => find_one(inv, &Ref::Name(n.clone()))?,
                (None, None) => return Err(TargetError::NothingNamed),
            };
            push(vm);
        }
        Selector::List(refs) => {
            let mut errors = Vec::new();
            for r in refs {
                match find_one(inv, r) {
                    Ok(vm) => push(vm),
                    Err(e) => errors.push(e),
                }
            }
            if !errors.is_empty() {
                return Err(TargetError::List(errors));
            }
        }
        Selector::Tags(tags) => {
            let mut hits: Vec<&Inventory> = inv
                .iter()
                .filter(|vm| !vm.template && !vm.container && tags.iter().all(|t| vm.has_tag(t)))
                .collect();
            hits.sort_by_key(|v| v.vmid);
            for vm in hits {
                push(vm);
            }
        }
    }
    if let Some(t) = out.iter().find(|v| v.template) {
        return Err(TargetError::Template(t.label()));
    }
    Ok(out)
}

/// Split the targets into steps. `order` lists steps in sequence, each one VM or a list of VMs (by
/// vmid or name); every target not listed forms one last step. Each item must name a target.
pub fn plan_steps(targets: &[Inventory], order: &[Value]) -> Result<Vec<Vec<usize>>, TargetError> {
    let mut steps: Vec<Vec<usize>> = Vec::new();
    let mut placed = vec![false; targets.len()];
    for (i, entry) in order.iter().enumerate() {
        let items: Vec<&Value> = match entry {
            Value::Array(a) => a.iter().collect(),
            v => vec![v],
        };
        let mut step = Vec::new();
        for item in items {
            let r = Ref::parse(item, &format!("order[{i}]"))?;
            let hits: Vec<usize> = targets
                .iter()
                .enumerate()
                .filter(|(_, vm)| r.matches(vm))
                .map(|(k, _)| k)
                .collect();
            let k = match hits.as_slice() {
                [] => {
                    return Err(TargetError::NotATarget {
                        i,
                        reference: r.describe(),
                    })
                }
                [k] => *k,
                _ => {
                    return Err(TargetError::SeveralTargets {
                        i,
                        reference: r.describe(),
                    })
                }
            };
            if placed[k] {
                return Err(TargetError::Repeated {
                    i,
                    vm: targets[k].label(),
                });
            }
            placed[k] = true;
            step.push(k);
        }
        if !step.is_empty() {
            steps.push(step);
        }
    }
    let rest: Vec<usize> = (0..targets.len()).filter(|k| !placed[*k]).collect();
    if !rest.is_empty() {
        steps.push(rest);
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vm(vmid: u32, name: &str, node: &str, tags: &[&str]) -> Inventory {
        crate::fake::inventory(vmid, name, node, tags)
    }

    fn cluster() -> Vec<Inventory> {
        let mut tpl = vm(9000, "rhcos-tpl", "pve1", &["ocp-a"]);
        tpl.template = true;
        vec![
            vm(103, "worker-0", "pve2", &["ocp-a", "proxshift"]),
            vm(101, "master-0", "pve1", &["ocp-a", "proxshift"]),
            vm(102, "master-1", "pve2", &["ocp-a", "proxshift"]),
            vm(200, "dup", "pve1", &[]),
            vm(201, "dup", "pve2", &[]),
            vm(300, "other", "pve1", &["ocp-b"]),
            tpl,
        ]
    }

    fn ids(v: &[Inventory]) -> Vec<u32> {
        v.iter().map(|x| x.vmid).collect()
    }

    /// A container is never a target: its vmid is refused naming it, its name and tags match
    /// nothing (a VM of the same name is the one found).
    #[test]
    fn containers_are_never_targets() {
        let mut c = cluster();
        let mut ct = vm(400, "worker-0", "pve1", &["ocp-a", "proxshift"]);
        ct.container = true;
        c.push(ct);
        let e = resolve(
            &c,
            &Selector::One {
                vmid: Some(400),
                name: None,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("vmid 400 is the LXC container 'worker-0' on node 'pve1'"),
            "{e}"
        );
        let e = resolve(&c, &Selector::List(vec![Ref::Id(400)])).unwrap_err();
        assert!(
            matches!(e, TargetError::List(ref l) if matches!(l[0], TargetError::Container { vmid: 400, .. })),
            "{e:?}"
        );
        let by_name = resolve(
            &c,
            &Selector::One {
                vmid: None,
                name: Some("worker-0".into()),
            },
        )
        .unwrap();
        assert_eq!(ids(&by_name), [103]);
        let by_tags = resolve(&c, &Selector::Tags(vec!["ocp-a".into()])).unwrap();
        assert_eq!(ids(&by_tags), [101, 102, 103]);
    }

    #[test]
    fn one_by_vmid_name_or_both() {
        let c = cluster();
        let one = |vmid, name: Option<&str>| {
            resolve(
                &c,
                &Selector::One {
                    vmid,
                    name: name.map(str::to_string),
                },
            )
        };
        assert_eq!(ids(&one(Some(101), None).unwrap()), vec![101]);
        assert_eq!(ids(&one(None, Some("master-1")).unwrap()), vec![102]);
        assert_eq!(ids(&one(Some(101), Some("master-0")).unwrap()), vec![101]);
        let e = one(Some(101), Some("master-1")).unwrap_err().to_string();
        assert!(e.contains("named 'master-0'"), "{e}");
        let e = one(Some(999), None).unwrap_err().to_string();
        assert!(e.contains("no VM with vmid 999"), "{e}");
        let e = one(None, Some("dup")).unwrap_err().to_string();
        assert!(
            e.contains("matches 2 VMs (200 on pve1, 201 on pve2)"),
            "{e}"
        );
        let e = one(Some(9000), None).unwrap_err().to_string();
        assert!(e.contains("template"), "{e}");
    }

    #[test]
    fn list_keeps_user_order_and_reports_every_bad_item() {
        let c = cluster();
        let refs = vec![
            Ref::Name("worker-0".into()),
            Ref::Id(101),
            Ref::Name("worker-0".into()),
        ];
        assert_eq!(
            ids(&resolve(&c, &Selector::List(refs)).unwrap()),
            vec![103, 101]
        );
        let e = resolve(
            &c,
            &Selector::List(vec![Ref::Name("nope".into()), Ref::Name("dup".into())]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("name 'nope'") && e.contains("name 'dup' matches 2"),
            "{e}"
        );
    }

    #[test]
    fn tags_select_all_non_templates_in_vmid_order() {
        let c = cluster();
        let got = resolve(&c, &Selector::Tags(vec!["OCP-A".into()])).unwrap();
        assert_eq!(ids(&got), vec![101, 102, 103]);
        let got = resolve(&c, &Selector::Tags(vec!["ocp-a".into(), "missing".into()])).unwrap();
        assert!(got.is_empty());
    }

    #[test]
    fn refs_parse_ids_and_names() {
        assert_eq!(Ref::parse(&json!(101), "vms[0]").unwrap(), Ref::Id(101));
        assert_eq!(Ref::parse(&json!("101"), "vms[0]").unwrap(), Ref::Id(101));
        assert_eq!(
            Ref::parse(&json!("master-0"), "vms[0]").unwrap(),
            Ref::Name("master-0".into())
        );
        assert!(Ref::parse(&json!(-1), "vms[0]").is_err());
        assert!(Ref::parse(&json!(""), "vms[0]").is_err());
        assert!(Ref::parse(&json!({"a": 1}), "vms[2]")
            .unwrap_err()
            .to_string()
            .starts_with("vms[2]"));
    }

    #[test]
    fn order_makes_steps_and_the_rest_goes_last() {
        let c = resolve(&cluster(), &Selector::Tags(vec!["ocp-a".into()])).unwrap();
        // c = [101 master-0, 102 master-1, 103 worker-0]
        assert_eq!(plan_steps(&c, &[]).unwrap(), vec![vec![0, 1, 2]]);
        assert_eq!(
            plan_steps(&c, &[json!("master-0")]).unwrap(),
            vec![vec![0], vec![1, 2]]
        );
        assert_eq!(
            plan_steps(&c, &[json!(103), json!(["master-1", 101])]).unwrap(),
            vec![vec![2], vec![1, 0]]
        );
        let e = plan_steps(&c, &[json!("other")]).unwrap_err().to_string();
        assert!(
            e.contains("order[0]: name 'other' is not one of the VMs"),
            "{e}"
        );
        let e = plan_steps(&c, &[json!("master-0"), json!([101])])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("order[1]: master-0 (101) appears in order more than once"),
            "{e}"
        );
        assert_eq!(plan_steps(&c, &[json!([])]).unwrap(), vec![vec![0, 1, 2]]);
    }
}
