//! The Proxmox VE API client shared by `proxmox_vm` and `vm_lifecycle`. There is no other Proxmox
//! HTTP, auth, retry or task-waiting code in the project; modules build on this.
//!
//! # Public API (stable; other crates rely on it)
//!
//! Connection
//! - [`connection_options()`] → `Vec<ansible_module::Opt>`: `api_host` (env `PROXMOX_HOST`), `api_port`
//!   (8006, `PROXMOX_PORT`), `api_user` (`PROXMOX_USER`), `api_password` (`PROXMOX_PASSWORD`, no_log), `api_token_id`
//!   (`PROXMOX_TOKEN_ID`), `api_token_secret` (`PROXMOX_TOKEN_SECRET`, no_log), `validate_certs` (true,
//!   `PROXMOX_VALIDATE_CERTS`), `ca_path`, `api_timeout` (30 s per request). Add them to a spec with
//!   `ArgSpec::new(..).with(connection_options())`; read them with `m.options::<ConnectionOptions>()`
//!   (or a struct that `#[serde(flatten)]`s it).
//! - [`Client::connect`]`(&ConnectionOptions)`: token auth when a token is configured (preferred, no
//!   CSRF), else ticket login (`POST /access/ticket`) with the CSRF header on writes, renewal after
//!   1 h and one re-login on a 401. [`Client::with_backoff`] / [`Client::with_poll_interval`] tune
//!   retries and polling (tests use short ones).
//!
//! Requests — paths are API paths without `/api2/json`, e.g. `/nodes/pve1/qemu/101/config`
//! - [`Client::get`], [`Client::post`], [`Client::put`], [`Client::delete`] return the `data` of the
//!   envelope; [`Client::get_as`] decodes it; [`Client::call_envelope`] returns the whole envelope.
//! - [`Params`]: ordered form/query parameters; [`Params::flag`] encodes booleans as `1`/`0`.
//!   POST/PUT send them form-encoded; GET/DELETE in the query string (never a body).
//! - Transient failures are retried with [`proxshift_http::Backoff`]: file/storage lock timeouts
//!   (`can't lock file … got timeout`), 502/503/504 and connection failures. 401 is never retried in
//!   a loop (PVE delays each one by ~3 s). [`Client::post_once`] (creates and clones) does not
//!   resend after a gateway error ([`Error::is_gateway_error`]): the request may have taken effect,
//!   and the caller checks for the VM first.
//!
//! Errors — [`Error`]
//! - `Api(ErrorResponse{method, path, status, message, errors})`: `message` from the body (PVE ≥ 8.3) or the
//!   reason phrase (older); `errors` is the per-field map of a 400. Helpers: [`Error::is_not_found`]
//!   (500 + "does not exist" …), [`Error::is_already_exists`], [`Error::is_lock_timeout`],
//!   [`Error::locked`] (`VM is locked (x)`), [`Error::is_digest_mismatch`], [`Error::is_transient`],
//!   [`Error::status`], [`Error::server_text`].
//! - `NodeUnreachable{node, status, detail}` for HTTP 595/596 ("node X is offline or unreachable").
//! - `Task(TaskError{upid, node, kind, exitstatus, log_tail})`, `Timeout{what, waited, pending,
//!   log_tail}`, `Transport{..}`, `Invalid(msg)`.
//!
//! Tasks
//! - [`Upid`] (`"UPID:…".parse()`), [`Client::wait_task`]`(upid, timeout)` → [`TaskOutcome`]
//!   (`OK`/`WARNINGS: n` are success), [`Client::run_task`]`(timeout, || start)` (start + wait, restarting
//!   on lock-contention task failures), [`Client::task_status`], [`Client::task_log_tail`],
//!   [`Client::wait_unlocked`]`(node, vmid, timeout)`.
//!
//! Typed calls (inherent methods of [`Client`])
//! - Reads: `version`, `nodes` → [`NodeInfo`], `node_memory` → [`NodeMemory`], `cluster_vms` →
//!   [`ClusterVm`] (QEMU only), `vmid_is_free`, `next_id`, `vm_config(node, vmid, current)`,
//!   `vm_pending` → [`PendingItem`], `vm_status` (raw `status/current`), `storages` → [`StorageInfo`]
//!   (with formats), `storage_content` → [`Volume`].
//! - Writes (each waits for its task with the given timeout): `create_vm`, `clone_vm`, `update_config`
//!   (async POST), `resize_disk`, `destroy_vm` (purge / destroy-unreferenced-disks in the query),
//!   `vm_action(node, vmid, "start"|"stop"|…, params, timeout)`, `upload_iso` (multipart, checksum
//!   verified by the server) and [`sha256_file`], `delete_volume(node, volid, timeout)` (`imgdel`;
//!   a UPID or PVE's `null`, an absent volume a `WARNINGS` task, not an error); `snapshot.rs`:
//!   `create_snapshot` (sent once), `delete_snapshot`, `rollback_snapshot` (`qmsnapshot`,
//!   `qmdelsnapshot`, `qmrollback`; the listing is `guest_snapshots`).
//!
//! - HA (`ha.rs`, plain requests, no task): `ha_resources` → [`HaResource`],
//!   `ha_resource_create/update/delete`, `ha_rules` → [`HaRule`] (PVE ≥ 9), `ha_rule_create/update/delete`,
//!   `ha_groups` → [`HaGroup`] (PVE 8), `ha_group_create/update/delete`, `ha_services` → [`HaService`]
//!   (the `service` entries of `status/current`).
//!
//! `power.rs` is reserved for `vm_lifecycle`'s power/status/agent calls.

mod api;
mod client;
mod connection;
mod error;
mod ha;
pub mod power;
mod snapshot;
mod task;
mod upload;

pub use api::{
    lenient_bool, lenient_u64, value_u64, ClusterVm, NodeInfo, NodeMemory, PendingItem,
    StorageFormats, StorageInfo, Volume,
};
pub use client::{Client, Params};
pub use connection::{
    connect_module, connection_options, Auth, ConnectionOptions, INSECURE_WARNING,
};
pub use error::{from_response, Error, ErrorResponse, TaskError};
pub use ha::{ha_node_list, ha_sid_vmid, HaGroup, HaResource, HaRule, HaService};
pub use proxshift_http::Backoff;
pub use task::{exitstatus_ok, TaskOutcome, Upid, LOG_TAIL_LINES};
pub use upload::sha256_file;
