//! Endpoint handlers, one file per API area.

mod access;
mod agent;
mod cluster;
mod ha;
mod ha_rules;
mod lxc;
mod pools;
mod qemu;
mod storage;
mod tasks;
mod users;

use crate::error::{ErrorReply, ReplyResult};
use crate::server::{Ctx, Reply};

pub use ha_rules::rules_route_exists;

/// Routes a validated, authenticated request to its handler.
pub fn dispatch(ctx: &mut Ctx) -> ReplyResult<Reply> {
    let (m, p) = (ctx.def.method.as_str(), ctx.def.path.as_str());
    // Handlers that add top-level keys (`total`) return a full Reply.
    match (m, p) {
        ("GET", "/nodes/{node}/tasks") => return tasks::list(ctx),
        ("GET", "/nodes/{node}/tasks/{upid}/log") => return tasks::log(ctx),
        _ => {}
    }
    let r = match (m, p) {
        ("GET", "/version") => cluster::version(ctx),
        ("GET", "/cluster/nextid") => cluster::nextid(ctx),
        ("GET", "/cluster/resources") => cluster::resources(ctx),
        ("GET", "/nodes") => cluster::nodes(ctx),
        ("GET", "/nodes/{node}/status") => cluster::node_status(ctx),

        ("GET", "/cluster/ha/resources") => ha::list(ctx),
        ("POST", "/cluster/ha/resources") => ha::create(ctx),
        ("GET", "/cluster/ha/resources/{sid}") => ha::get(ctx),
        ("PUT", "/cluster/ha/resources/{sid}") => ha::update(ctx),
        ("DELETE", "/cluster/ha/resources/{sid}") => ha::delete(ctx),
        ("GET", "/cluster/ha/status/current") => ha::status_current(ctx),
        ("GET", "/cluster/ha/status/manager_status") => ha::manager_status(ctx),
        ("GET", "/cluster/ha/rules") => ha_rules::rules_list(ctx),
        ("POST", "/cluster/ha/rules") => ha_rules::rule_create(ctx),
        ("GET", "/cluster/ha/rules/{rule}") => ha_rules::rule_get(ctx),
        ("PUT", "/cluster/ha/rules/{rule}") => ha_rules::rule_update(ctx),
        ("DELETE", "/cluster/ha/rules/{rule}") => ha_rules::rule_delete(ctx),
        ("GET", "/cluster/ha/groups") | ("GET", "/cluster/ha/groups/{group}") => {
            ha_rules::groups_get(ctx)
        }
        ("POST", "/cluster/ha/groups") => ha_rules::group_write(ctx, true),
        ("PUT", "/cluster/ha/groups/{group}") => ha_rules::group_write(ctx, false),
        ("DELETE", "/cluster/ha/groups/{group}") => ha_rules::group_delete(ctx),

        ("POST", "/access/ticket") => access::ticket(ctx),
        ("GET", "/access/users") => access::users(ctx),
        ("POST", "/access/users") => users::user_create(ctx),
        ("GET", "/access/users/{userid}") => users::user_get(ctx),
        ("GET", "/access/users/{userid}/token") => access::token_list(ctx),
        ("GET", "/access/users/{userid}/token/{tokenid}") => access::token_get(ctx),
        ("POST", "/access/users/{userid}/token/{tokenid}") => access::token_create(ctx),
        ("PUT", "/access/users/{userid}/token/{tokenid}") => access::token_update(ctx),
        ("DELETE", "/access/users/{userid}/token/{tokenid}") => access::token_delete(ctx),
        ("GET", "/access/roles") => access::roles(ctx),
        ("POST", "/access/roles") => access::role_create(ctx),
        ("GET", "/access/roles/{roleid}") => access::role_get(ctx),
        ("PUT", "/access/roles/{roleid}") => access::role_update(ctx),
        ("DELETE", "/access/roles/{roleid}") => access::role_delete(ctx),
        ("GET", "/access/acl") => access::acl_list(ctx),
        ("PUT", "/access/acl") => access::acl_update(ctx),
        ("GET", "/access/permissions") => access::permissions(ctx),

        ("GET", "/nodes/{node}/qemu") => qemu::list(ctx),
        ("POST", "/nodes/{node}/qemu") => qemu::create(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}") => qemu::index(ctx),
        ("DELETE", "/nodes/{node}/qemu/{vmid}") => qemu::destroy(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}/config") => qemu::config_get(ctx),
        ("POST", "/nodes/{node}/qemu/{vmid}/config") => qemu::config_update(ctx, true),
        ("PUT", "/nodes/{node}/qemu/{vmid}/config") => qemu::config_update(ctx, false),
        ("GET", "/nodes/{node}/qemu/{vmid}/pending") => qemu::pending(ctx),
        ("PUT", "/nodes/{node}/qemu/{vmid}/resize") => qemu::resize(ctx),
        ("POST", "/nodes/{node}/qemu/{vmid}/clone") => qemu::clone(ctx),
        ("POST", "/nodes/{node}/qemu/{vmid}/template") => qemu::template(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}/status") => qemu::status_index(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}/status/current") => qemu::status_current(ctx),
        ("POST", p) if p.starts_with("/nodes/{node}/qemu/{vmid}/status/") => {
            let action = p.rsplit('/').next().unwrap_or_default().to_string();
            qemu::power(ctx, &action)
        }
        ("GET", "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces") => {
            agent::agent_interfaces(ctx)
        }
        ("POST", "/nodes/{node}/qemu/{vmid}/agent/ping") => agent::agent_ping(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}/feature") => qemu::feature(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}/snapshot") => qemu::snapshot_list(ctx),
        ("POST", "/nodes/{node}/qemu/{vmid}/snapshot") => qemu::snapshot_create(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}") => qemu::snapshot_index(ctx),
        ("DELETE", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}") => qemu::snapshot_delete(ctx),
        ("GET", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config") => {
            qemu::snapshot_config(ctx)
        }
        ("PUT", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config") => {
            qemu::snapshot_config_update(ctx)
        }
        ("POST", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback") => {
            qemu::snapshot_rollback(ctx)
        }
        ("GET", "/nodes/{node}/lxc") => lxc::list(ctx),
        ("POST", "/nodes/{node}/lxc") => lxc::create(ctx),
        ("GET", "/nodes/{node}/lxc/{vmid}/config") => lxc::config_get(ctx),
        ("GET", "/nodes/{node}/lxc/{vmid}/status/current") => lxc::status_current(ctx),
        ("GET", "/nodes/{node}/lxc/{vmid}/snapshot") => lxc::snapshot_list(ctx),
        ("GET", "/nodes/{node}/lxc/{vmid}/interfaces") => lxc::interfaces(ctx),
        ("GET", "/nodes/{node}/network") => cluster::node_network(ctx),

        ("GET", "/nodes/{node}/tasks/{upid}/status") => tasks::status(ctx),
        ("DELETE", "/nodes/{node}/tasks/{upid}") => tasks::stop(ctx),

        ("GET", "/nodes/{node}/storage") => storage::list(ctx),
        ("GET", "/nodes/{node}/storage/{storage}/content") => storage::content(ctx),
        ("POST", "/nodes/{node}/vzdump") => storage::vzdump(ctx),
        ("POST", "/nodes/{node}/storage/{storage}/upload") => storage::upload(ctx),
        ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}") => {
            storage::delete_volume(ctx)
        }

        ("GET", "/pools") => pools::list(ctx),
        ("POST", "/pools") => pools::create(ctx),
        ("PUT", "/pools") | ("PUT", "/pools/{poolid}") => pools::update(ctx),
        ("GET", "/pools/{poolid}") => pools::get(ctx),
        ("DELETE", "/pools/{poolid}") => pools::delete(ctx),
        _ => Err(ErrorReply::not_implemented(format!(
            "Method '{m} {p}' not implemented"
        ))),
    };
    r.map(Reply::from)
}
