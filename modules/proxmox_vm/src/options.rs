//! The module's options: the argument spec (shared between the top level and each `vms` item) and
//! the typed structs they deserialise into.

use ansible_module::{ArgSpec, Opt, Type};
use pve_client::ConnectionOptions;
use pve_types::VmSpec;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::VmError;

/// Options that describe one VM. `with_defaults` is false for `vms` items, whose unset options are
/// taken from the top level (the shared defaults), so they must not carry defaults of their own.
pub fn vm_options(with_defaults: bool) -> Vec<Opt> {
    let d = |o: Opt, v: Value| if with_defaults { o.default(v) } else { o };
    vec![
        d(
            Opt::str("state").choices(&["present", "absent"]),
            "present".into(),
        ),
        Opt::int("vmid"),
        Opt::str("name"),
        Opt::str("node"),
        Opt::list("allowed_nodes", Type::Str),
        d(Opt::int("memory_adjustment"), 100.into()),
        Opt::list("vmid_range", Type::Int),
        Opt::dict("clone").options(
            ArgSpec::new(vec![
                Opt::int("vmid"),
                Opt::str("name"),
                Opt::bool("full").default(true),
                Opt::str("storage"),
                Opt::str("format").choices(&["raw", "qcow2", "vmdk"]),
            ])
            .required_one_of(&["vmid", "name"])
            .mutually_exclusive(&["vmid", "name"]),
        ),
        Opt::str("pool"),
        // Unset = unmanaged: a default would rewrite adopted and cloned VMs' CPU type (and
        // need a reboot). The site flow sets `cpu` itself (`cluster_model.yml`).
        Opt::str("cpu"),
        Opt::int("cores"),
        Opt::int("sockets"),
        Opt::int("memory"),
        Opt::int("balloon"),
        Opt::str("bios").choices(&["seabios", "ovmf"]),
        Opt::dict("efidisk").options(ArgSpec::new(vec![
            Opt::str("storage"),
            Opt::str("efitype").choices(&["2m", "4m"]).default("4m"),
            Opt::bool("pre_enrolled_keys").default(false),
        ])),
        Opt::str("machine"),
        Opt::dict("tpm").options(ArgSpec::new(vec![
            Opt::str("storage"),
            Opt::str("version")
                .choices(&["v1.2", "v2.0"])
                .default("v2.0"),
        ])),
        Opt::str("scsihw").choices(&[
            "lsi",
            "lsi53c810",
            "virtio-scsi-pci",
            "virtio-scsi-single",
            "megasas",
            "pvscsi",
        ]),
        Opt::list("disks", Type::Dict).options(ArgSpec::new(vec![
            Opt::str("slot").required(),
            Opt::str("storage").required(),
            Opt::str("size").required(),
            Opt::str("format").choices(&["raw", "qcow2", "vmdk"]),
            Opt::bool("ssd"),
            Opt::bool("iothread"),
            Opt::bool("discard"),
            Opt::str("cache").choices(&[
                "none",
                "writethrough",
                "writeback",
                "unsafe",
                "directsync",
            ]),
            Opt::str("wwn"),
            Opt::str("serial"),
            Opt::bool("backup"),
            Opt::str("import_from"),
        ])),
        Opt::list("nics", Type::Dict).options(ArgSpec::new(vec![
            Opt::str("slot").required(),
            Opt::str("model")
                .default("virtio")
                .choices(pve_types::spec::NIC_MODELS),
            Opt::str("bridge").required(),
            Opt::str("mac"),
            Opt::int("vlan"),
            Opt::int("mtu"),
            Opt::bool("firewall"),
            Opt::int("queues"),
            Opt::bool("link_down"),
        ])),
        Opt::dict("cdrom").options(ArgSpec::new(vec![
            Opt::str("slot").default("ide2"),
            Opt::str("iso"),
        ])),
        Opt::list("boot", Type::Str),
        Opt::bool("onboot"),
        Opt::str("ostype"),
        Opt::bool("agent"),
        Opt::list("tags", Type::Str),
        Opt::str("description"),
        Opt::bool("protection"),
        Opt::int("vcpus"),
        Opt::bool("numa"),
        Opt::str("hotplug"),
        Opt::str("vga"),
        Opt::dict("serial"),
        Opt::str("rng0"),
        Opt::str("startup"),
        Opt::dict("hostpci"),
        Opt::dict("cloudinit_drive").options(ArgSpec::new(vec![
            Opt::str("storage").required(),
            Opt::str("slot").default("ide0"),
        ])),
        Opt::str("ciuser"),
        Opt::str("sshkeys"),
        Opt::dict("ipconfig"),
        Opt::str("nameserver"),
        Opt::str("searchdomain"),
        Opt::str("cicustom"),
        // cipassword is the guest user's cloud-init password: no_log, the rest of the dict shown.
        Opt::dict("extra_config").no_log_keys(&["cipassword"]),
        d(Opt::bool("purge_unlisted_disks"), false.into()),
        Opt::dict("agent_iso").options(
            ArgSpec::new(vec![
                Opt::str("state")
                    .choices(&["present", "absent"])
                    .default("present"),
                Opt::path("src"),
                Opt::str("storage").required(),
                Opt::str("filename"),
                Opt::str("sha256"),
                Opt::str("volid"),
                Opt::str("name_prefix"),
            ])
            .required_if("state", "present", &["src"])
            .required_if("state", "absent", &["filename", "volid", "name_prefix"]),
        ),
        d(Opt::str("owner_tag"), "proxshift".into()),
        d(Opt::bool("adopt"), false.into()),
        d(Opt::bool("force"), false.into()),
        d(
            Opt::str("apply_pending").choices(&["none", "reboot"]),
            "none".into(),
        ),
        d(Opt::bool("allow_overcommit"), false.into()),
    ]
}

/// Per-operation timeouts in seconds.
fn timeout_options() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::int("create").default(600),
        Opt::int("clone").default(1800),
        Opt::int("config").default(300),
        Opt::int("resize").default(300),
        Opt::int("delete").default(600),
        Opt::int("upload").default(1800),
        Opt::int("stop").default(300),
        Opt::int("reboot").default(600),
        Opt::int("lock").default(300),
    ])
}

/// Names of the per-VM options (what a `vms` item may set and what it inherits).
pub fn vm_option_names() -> Vec<&'static str> {
    vm_options(false).iter().map(|o| o.name).collect()
}

pub fn argument_spec() -> ArgSpec {
    let mut opts = vm_options(true);
    opts.push(Opt::list("vms", Type::Dict).options(ArgSpec::new(vm_options(false))));
    opts.push(Opt::int("parallel").default(4));
    opts.push(
        Opt::dict("timeouts")
            .options(timeout_options())
            .default(serde_json::json!({})),
    );
    ArgSpec::new(opts)
        .with(pve_client::connection_options())
        .mutually_exclusive(&["vms", "name"])
        .mutually_exclusive(&["vms", "vmid"])
        .mutually_exclusive(&["node", "allowed_nodes"])
        .required_one_of(&["name", "vmid", "vms"])
}

#[derive(Debug, Clone, Deserialize)]
pub struct CloneArgs {
    #[serde(default)]
    pub vmid: Option<u32>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "yes")]
    pub full: bool,
    #[serde(default)]
    pub storage: Option<String>,
    #[serde(default)]
    pub format: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
pub struct AgentIso {
    /// `present` (upload and attach) or `absent` (delete it once the run's VMs are gone).
    #[serde(default = "present")]
    pub state: String,
    /// Required with `state: present` (the spec says so).
    #[serde(default)]
    pub src: Option<std::path::PathBuf>,
    pub storage: String,
    #[serde(default)]
    pub filename: Option<String>,
    /// The ISO's SHA-256 when the caller knows it (ocp_manifests' `iso_sha256`): the file is then
    /// read once, by the upload, and not at all when the storage already has it.
    #[serde(default)]
    pub sha256: Option<String>,
    /// With `state: absent`: the volume ID recorded when the ISO was uploaded; `storage` and
    /// `filename` must name exactly this volume.
    #[serde(default)]
    pub volid: Option<String>,
    /// With `state: absent`: what the file name must start with (the cluster's tag in the name).
    #[serde(default)]
    pub name_prefix: Option<String>,
}

impl AgentIso {
    pub fn absent(&self) -> bool {
        self.state == "absent"
    }
}

/// One VM's options after merging a `vms` item over the shared defaults.
#[derive(Debug, Clone, Deserialize)]
pub struct VmArgs {
    #[serde(default = "present")]
    pub state: String,
    #[serde(default)]
    pub vmid: Option<u32>,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub allowed_nodes: Option<Vec<String>>,
    #[serde(default = "hundred")]
    pub memory_adjustment: u32,
    /// `vmid_range` as given; [`vm_args`] checks it into [`VmArgs::vmid_range`].
    #[serde(default, rename = "vmid_range")]
    vmid_range_given: Option<Vec<u32>>,
    #[serde(skip)]
    pub vmid_range: Option<VmidRange>,
    #[serde(default)]
    pub clone: Option<CloneArgs>,
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default)]
    pub agent_iso: Option<AgentIso>,
    #[serde(default = "owner")]
    pub owner_tag: String,
    #[serde(default)]
    pub adopt: bool,
    #[serde(default)]
    pub force: bool,
    #[serde(default = "none")]
    pub apply_pending: String,
    #[serde(default)]
    pub allow_overcommit: bool,
    #[serde(default)]
    pub purge_unlisted_disks: bool,
    #[serde(flatten)]
    pub spec: VmSpec,
}

/// The inclusive vmid range new VMs take their ids from (`vmid_range: [start, end]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmidRange {
    pub start: u32,
    pub end: u32,
}

impl VmidRange {
    /// `[start, end]`, a valid range of vmids; `who` names the VM in the error.
    fn parse(given: &[u32], who: &str) -> Result<Self, VmError> {
        let [start, end] = given else {
            return Err(VmError::Refused(format!(
                "{who}: vmid_range needs exactly two numbers, [start, end]"
            )));
        };
        pve_types::placement::validate_range(*start, *end)
            .map_err(|e| VmError::Refused(format!("{who}: {e}")))?;
        Ok(VmidRange {
            start: *start,
            end: *end,
        })
    }
}

impl VmArgs {
    /// How messages name this VM: its name, else its vmid.
    pub fn who(&self) -> String {
        self.spec
            .name
            .clone()
            .or(self.vmid.map(|v| v.to_string()))
            .unwrap_or_default()
    }

    /// The pool a new VM is created in (`pool: ""` means none).
    pub fn new_vm_pool(&self) -> Option<&str> {
        self.pool.as_deref().filter(|p| !p.is_empty())
    }
}

fn present() -> String {
    "present".into()
}
fn hundred() -> u32 {
    100
}
fn owner() -> String {
    "proxshift".into()
}
fn none() -> String {
    "none".into()
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Timeouts {
    #[serde(default = "t600")]
    pub create: u64,
    #[serde(default = "t1800")]
    pub clone: u64,
    #[serde(default = "t300")]
    pub config: u64,
    #[serde(default = "t300")]
    pub resize: u64,
    #[serde(default = "t600")]
    pub delete: u64,
    #[serde(default = "t1800")]
    pub upload: u64,
    #[serde(default = "t300")]
    pub stop: u64,
    #[serde(default = "t600")]
    pub reboot: u64,
    #[serde(default = "t300")]
    pub lock: u64,
}

fn t300() -> u64 {
    300
}
fn t600() -> u64 {
    600
}
fn t1800() -> u64 {
    1800
}

impl Default for Timeouts {
    fn default() -> Self {
        serde_json::from_value(serde_json::json!({})).expect("defaults")
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Args {
    #[serde(flatten)]
    pub conn: ConnectionOptions,
    #[serde(default)]
    pub vms: Option<Vec<Value>>,
    #[serde(default = "four")]
    pub parallel: u32,
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
}

fn four() -> u32 {
    4
}

/// The VM option values of the top level (the shared defaults of `vms`).
pub fn shared_defaults(params: &Map<String, Value>) -> Map<String, Value> {
    vm_option_names()
        .into_iter()
        .filter_map(|k| params.get(k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// A `vms` item over the shared defaults: set keys of the item win, whole values (dicts are not merged).
pub fn merge_item(defaults: &Map<String, Value>, item: &Value) -> Map<String, Value> {
    let mut m = defaults.clone();
    if let Value::Object(it) = item {
        for (k, v) in it {
            if !v.is_null() {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    m
}

/// One VM's options, typed; `vmid_range` is checked here so everything after sees a valid range.
pub fn vm_args(m: Map<String, Value>) -> Result<VmArgs, VmError> {
    let mut a: VmArgs = serde_json::from_value(Value::Object(m)).map_err(VmError::Options)?;
    if let Some(given) = &a.vmid_range_given {
        a.vmid_range = Some(VmidRange::parse(given, &a.who())?);
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `extra_config.cipassword`, top level and per VM, shows in no result: not when option checking
    /// fails, not when connecting fails (no Proxmox at that address).
    #[test]
    fn cipassword_is_masked_in_every_exit_path() {
        let module = module_testkit::TestModule::new("proxmox_vm", argument_spec(), crate::run)
            .hiding("ci-canary-top-7a7a")
            .hiding("ci-canary-vm-8b8b");
        let base = json!({"api_host": "127.0.0.1:9", "api_user": "root@pam", "api_password": "pw-canary-9c9c",
                          "node": "pve1", "timeouts": {"create": 1},
                          "extra_config": {"cipassword": "ci-canary-top-7a7a", "tablet": 0},
                          "vms": [{"name": "vm2", "extra_config": {"cipassword": "ci-canary-vm-8b8b"}}]});
        let mut bad = base.clone();
        bad["memory"] = json!("lots");
        for args in [bad, base] {
            let r = module.failed(&args);
            let shown = &r["invocation"]["module_args"];
            assert_eq!(
                shown["extra_config"]["cipassword"],
                json!(ansible_module::mask::MASK_WHOLE)
            );
            assert_eq!(shown["extra_config"]["tablet"], json!(0));
            assert_eq!(
                shown["vms"][0]["extra_config"]["cipassword"],
                json!(ansible_module::mask::MASK_WHOLE)
            );
        }
    }

    #[test]
    fn items_inherit_shared_defaults_and_override_them() {
        let top = json!({"cpu": "host", "memory": 16384, "state": "present", "cores": 4,
                         "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "120G"}],
                         "api_host": "x"});
        let defaults = shared_defaults(top.as_object().unwrap());
        assert!(!defaults.contains_key("api_host"));
        let item = json!({"name": "worker-0", "cores": 2, "memory": null});
        let a = vm_args(merge_item(&defaults, &item)).unwrap();
        assert_eq!(a.spec.name.as_deref(), Some("worker-0"));
        assert_eq!(a.spec.cores, Some(2));
        assert_eq!(a.spec.memory, Some(16384));
        assert_eq!(a.spec.disks.unwrap()[0].size, "120G");
        assert_eq!(a.owner_tag, "proxshift");
    }

    #[test]
    fn vmid_range_is_read_into_a_pair() {
        let a = vm_args(
            json!({"name": "w", "vmid_range": [4100, 4199]})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(
            a.unwrap().vmid_range,
            Some(VmidRange {
                start: 4100,
                end: 4199
            })
        );
        let e = vm_args(
            json!({"name": "w", "vmid_range": [4100]})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "w: vmid_range needs exactly two numbers, [start, end]"
        );
        let e = vm_args(
            json!({"name": "w", "vmid_range": [4199, 4100]})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert!(e.unwrap_err().to_string().starts_with("w: "));
    }

    #[test]
    fn timeouts_default() {
        let t = Timeouts::default();
        assert_eq!((t.create, t.clone, t.lock), (600, 1800, 300));
    }
}
