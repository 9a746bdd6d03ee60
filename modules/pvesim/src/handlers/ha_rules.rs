//! `/cluster/ha/rules` (PVE ≥ 9, pve-ha-manager `PVE/API2/HA/Rules.pm`) and
//! `/cluster/ha/groups` (PVE 8, `PVE/API2/HA/Groups.pm`). On PVE 8 the rules routes do not
//! exist (`rules_route_exists`); PVE 9 has migrated groups to rules and refuses them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::ha::digest;
use crate::error::{ErrorReply, ReplyResult};
use crate::ha::{
    check_feasibility, parse_node_list, parse_sid_list, print_node_list, print_sid_list, sid,
    HaGroup, HaRule, RuleKind,
};
use crate::server::Ctx;
use crate::sim::{Generation, PveVersion, Sim};

/// Whether the release serves `path`: `/cluster/ha/rules` came with pve-ha-manager 5.0 (PVE 9);
/// on PVE 8 it answers as any unknown route does.
pub fn rules_route_exists(version: PveVersion, path: &str) -> bool {
    !(path.starts_with("/cluster/ha/rules") && version.generation() == Generation::Pve8)
}

fn rule_json(
    sim: &Sim,
    id: &str,
    r: &HaRule,
    errors: Option<&BTreeMap<String, Vec<String>>>,
) -> Value {
    let mut o = Map::new();
    o.insert("rule".into(), json!(id));
    o.insert("type".into(), json!(r.kind.type_name()));
    o.insert("resources".into(), json!(print_sid_list(&r.resources)));
    o.insert("digest".into(), json!(digest(sim)));
    o.insert("order".into(), json!(r.order));
    o.insert("disable".into(), json!(r.disable as u8));
    match &r.kind {
        RuleKind::NodeAffinity { nodes, strict } => {
            o.insert("nodes".into(), json!(print_node_list(nodes)));
            o.insert("strict".into(), json!(*strict as u8));
        }
        RuleKind::ResourceAffinity { positive } => {
            let a = if *positive { "positive" } else { "negative" };
            o.insert("affinity".into(), json!(a));
        }
    }
    if let Some(c) = &r.comment {
        o.insert("comment".into(), json!(c));
    }
    if let Some(e) = errors {
        let e: Map<String, Value> = e
            .iter()
            .map(|(k, v)| (k.clone(), json!(v.join(", "))))
            .collect();
        o.insert("errors".into(), Value::Object(e));
    }
    Value::Object(o)
}

/// `GET /cluster/ha/rules` (`index`): each rule with the feasibility errors it has, filtered by
/// `type` and `resource`.
pub fn rules_list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let sim = &*ctx.sim;
    let errors = check_feasibility(&sim.ha.rules, sim.nodes.len());
    let kind = ctx.opt("type");
    let resource = match ctx.opt("resource") {
        Some(r) => {
            Some(parse_sid_list(&r).map_err(|e| ErrorReply::param("resource", e.to_string()))?)
        }
        None => None,
    };
    let mut rules: Vec<(&String, &HaRule)> = sim.ha.rules.iter().collect();
    rules.sort_by_key(|(id, r)| (r.order, (*id).clone()));
    Ok(Value::Array(
        rules
            .into_iter()
            .filter(|(_, r)| kind.as_deref().is_none_or(|k| k == r.kind.type_name()))
            .filter(|(_, r)| {
                resource
                    .as_ref()
                    .is_none_or(|s| !s.is_disjoint(&r.resources))
            })
            .map(|(id, r)| rule_json(sim, id, r, errors.get(id)))
            .collect(),
    ))
}

/// `GET /cluster/ha/rules/{rule}` (`read_rule`).
pub fn rule_get(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("rule");
    let sim = &*ctx.sim;
    let r = sim
        .ha
        .rules
        .get(&id)
        .ok_or_else(|| ErrorReply::die(format!("no such ha rule '{id}'")))?;
    let errors = check_feasibility(&sim.ha.rules, sim.nodes.len());
    Ok(rule_json(sim, &id, r, errors.get(&id)))
}

/// Resources and nodes a rule names must exist: `$assert_resources_are_configured`,
/// `$assert_nodes_do_exist`.
fn assert_known(sim: &Sim, r: &HaRule, failed: &str) -> ReplyResult<()> {
    let missing: Vec<String> = r
        .resources
        .iter()
        .filter(|v| !sim.ha.resources.contains_key(v))
        .map(|v| sid(*v))
        .collect();
    if !missing.is_empty() {
        return Err(ErrorReply::die(format!(
            "{failed}: cannot use unmanaged resource(s) {}.",
            missing.join(", ")
        )));
    }
    if let RuleKind::NodeAffinity { nodes, .. } = &r.kind {
        let missing: Vec<&String> = nodes
            .keys()
            .filter(|n| !sim.nodes.contains_key(*n))
            .collect();
        if !missing.is_empty() {
            let list: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            return Err(ErrorReply::die(format!(
                "{failed}: cannot use non-existant node(s) {}.",
                list.join(", ")
            )));
        }
    }
    Ok(())
}

/// `$assert_feasibility`: the rule written must not be one `check_feasibility` refuses; a 400
/// naming the rule, its errors per option.
fn assert_feasible(sim: &Sim, rules: &BTreeMap<String, HaRule>, id: &str) -> ReplyResult<()> {
    let errors = check_feasibility(rules, sim.nodes.len());
    let Some(e) = errors.get(id) else {
        return Ok(());
    };
    let mut reply = ErrorReply::params(e.iter().map(|(k, v)| (k.clone(), v.join(", "))).collect());
    reply.message = format!("Rule '{id}' is invalid.");
    Err(reply)
}

/// The rule options of a create or update over `base` (`check_config`): `nodes` for
/// node-affinity, `affinity` for resource-affinity, `resources` for both.
fn rule_from_params(ctx: &Ctx, kind: &str, base: Option<&HaRule>) -> ReplyResult<HaRule> {
    let missing = |k: &str| ErrorReply::param(k, "property is missing and it is not optional");
    let resources: BTreeSet<u32> = match (ctx.opt("resources"), base) {
        (Some(r), _) => {
            parse_sid_list(&r).map_err(|e| ErrorReply::param("resources", e.to_string()))?
        }
        (None, Some(b)) => b.resources.clone(),
        (None, None) => return Err(missing("resources")),
    };
    let kind = match kind {
        "node-affinity" => {
            let (old_nodes, old_strict) = match base.map(|b| &b.kind) {
                Some(RuleKind::NodeAffinity { nodes, strict }) => (Some(nodes.clone()), *strict),
                _ => (None, false),
            };
            let nodes = match (ctx.opt("nodes"), old_nodes) {
                (Some(n), _) => {
                    parse_node_list(&n).map_err(|e| ErrorReply::param("nodes", e.to_string()))?
                }
                (None, Some(n)) => n,
                (None, None) => return Err(missing("nodes")),
            };
            let strict = ctx.opt("strict").map(|v| v == "1").unwrap_or(old_strict);
            RuleKind::NodeAffinity { nodes, strict }
        }
        _ => {
            let old = match base.map(|b| &b.kind) {
                Some(RuleKind::ResourceAffinity { positive }) => Some(*positive),
                _ => None,
            };
            let positive = match (ctx.opt("affinity").as_deref(), old) {
                (Some(a), _) => a == "positive",
                (None, Some(p)) => p,
                (None, None) => return Err(missing("affinity")),
            };
            RuleKind::ResourceAffinity { positive }
        }
    };
    Ok(HaRule {
        kind,
        resources,
        comment: ctx
            .opt("comment")
            .or_else(|| base.and_then(|b| b.comment.clone())),
        disable: ctx
            .opt("disable")
            .map(|v| v == "1")
            .unwrap_or(base.is_some_and(|b| b.disable)),
        order: base.map(|b| b.order).unwrap_or(0),
    })
}

/// `POST /cluster/ha/rules` (`create_rule`).
pub fn rule_create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let (id, kind) = (ctx.str("rule"), ctx.str("type"));
    let failed = "create ha rule failed";
    let mut rule = rule_from_params(ctx, &kind, None)?;
    if ctx.sim.ha.rules.contains_key(&id) {
        return Err(ErrorReply::die(format!(
            "{failed}: HA rule '{id}' already defined"
        )));
    }
    assert_known(ctx.sim, &rule, failed)?;
    // `PVE::HA::Rules::get_next_ordinal`.
    rule.order = ctx
        .sim
        .ha
        .rules
        .values()
        .map(|r| r.order)
        .max()
        .unwrap_or(0)
        + 1;
    let mut rules = ctx.sim.ha.rules.clone();
    rules.insert(id.clone(), rule);
    assert_feasible(ctx.sim, &rules, &id)?;
    ctx.sim.ha.rules = rules;
    ctx.sim.ha.generation += 1;
    Ok(Value::Null)
}

/// `PUT /cluster/ha/rules/{rule}` (`update_rule`): `digest`, options merged over the rule,
/// `delete` of optional ones, feasibility as on create.
pub fn rule_update(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("rule");
    let failed = "update HA rules failed";
    if ctx.opt("digest").is_some_and(|d| d != digest(ctx.sim)) {
        return Err(ErrorReply::die(format!(
            "{failed}: detected modified configuration - file changed by other user? Try again."
        )));
    }
    let base = ctx
        .sim
        .ha
        .rules
        .get(&id)
        .cloned()
        .ok_or_else(|| ErrorReply::die(format!("{failed}: HA rule '{id}' does not exist")))?;
    let mut rule = rule_from_params(ctx, base.kind.type_name(), Some(&base))?;
    for k in ctx.opt("delete").unwrap_or_default().split([',', ';', ' ']) {
        match k {
            "" => {}
            "comment" => rule.comment = None,
            "disable" => rule.disable = false,
            "strict" => {
                if let RuleKind::NodeAffinity { strict, .. } = &mut rule.kind {
                    *strict = false;
                }
            }
            other => {
                return Err(ErrorReply::die(format!(
                    "{failed}: no such option '{other}'"
                )))
            }
        }
    }
    assert_known(ctx.sim, &rule, failed)?;
    let mut rules = ctx.sim.ha.rules.clone();
    rules.insert(id.clone(), rule);
    assert_feasible(ctx.sim, &rules, &id)?;
    ctx.sim.ha.rules = rules;
    ctx.sim.ha.generation += 1;
    Ok(Value::Null)
}

/// `DELETE /cluster/ha/rules/{rule}` (`delete_rule`): deleting a missing rule succeeds.
pub fn rule_delete(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("rule");
    if ctx.sim.ha.rules.remove(&id).is_some() {
        ctx.sim.ha.generation += 1;
    }
    Ok(Value::Null)
}

/// PVE 9 answers every groups call with this once groups are migrated to rules (what
/// pve-ha-manager 5.x reports; pvesim plays a migrated cluster).
fn groups_on_pve8(ctx: &Ctx, what: &str) -> ReplyResult<()> {
    match ctx.sim.version.generation() {
        Generation::Pve8 => Ok(()),
        Generation::Pve9 => Err(ErrorReply::die(format!(
            "cannot {what}: ha groups have been migrated to rules"
        ))),
    }
}

fn group_json(sim: &Sim, id: &str, g: &HaGroup) -> Value {
    let mut o = json!({
        "group": id, "type": "group", "nodes": print_node_list(&g.nodes),
        "restricted": g.restricted as u8, "nofailback": g.nofailback as u8, "digest": digest(sim),
    });
    if let Some(c) = &g.comment {
        o["comment"] = json!(c);
    }
    o
}

/// `GET /cluster/ha/groups` and `GET /cluster/ha/groups/{group}`.
pub fn groups_get(ctx: &mut Ctx) -> ReplyResult<Value> {
    groups_on_pve8(ctx, "index groups")?;
    let sim = &*ctx.sim;
    match ctx.opt("group") {
        None => Ok(Value::Array(
            sim.ha
                .groups
                .iter()
                .map(|(id, g)| group_json(sim, id, g))
                .collect(),
        )),
        Some(id) => {
            let g = sim
                .ha
                .groups
                .get(&id)
                .ok_or_else(|| ErrorReply::die(format!("no such ha group '{id}'")))?;
            Ok(group_json(sim, &id, g))
        }
    }
}

/// `POST /cluster/ha/groups` (`create`) and `PUT /cluster/ha/groups/{group}` (`update`).
pub fn group_write(ctx: &mut Ctx, create: bool) -> ReplyResult<Value> {
    groups_on_pve8(
        ctx,
        if create {
            "create group"
        } else {
            "update group"
        },
    )?;
    let id = ctx.str("group");
    let failed = if create {
        "create ha group failed"
    } else {
        "update ha group failed"
    };
    let existing = ctx.sim.ha.groups.get(&id).cloned();
    let mut g = match (create, existing) {
        (true, Some(_)) => {
            return Err(ErrorReply::die(format!(
                "{failed}: ha group ID '{id}' already defined"
            )))
        }
        (false, None) => {
            return Err(ErrorReply::die(format!(
                "{failed}: no such ha group '{id}'"
            )))
        }
        (_, Some(g)) => g,
        (true, None) => HaGroup {
            nodes: BTreeMap::new(),
            restricted: false,
            nofailback: false,
            comment: None,
        },
    };
    if let Some(n) = ctx.opt("nodes") {
        g.nodes = parse_node_list(&n).map_err(|e| ErrorReply::param("nodes", e.to_string()))?;
    }
    if ctx.opt("restricted").is_some() {
        g.restricted = ctx.flag("restricted");
    }
    if ctx.opt("nofailback").is_some() {
        g.nofailback = ctx.flag("nofailback");
    }
    if let Some(c) = ctx.opt("comment") {
        g.comment = Some(c);
    }
    ctx.sim.ha.groups.insert(id, g);
    ctx.sim.ha.generation += 1;
    Ok(Value::Null)
}

/// `DELETE /cluster/ha/groups/{group}`: refused while a resource uses it.
pub fn group_delete(ctx: &mut Ctx) -> ReplyResult<Value> {
    groups_on_pve8(ctx, "delete group")?;
    let id = ctx.str("group");
    if let Some((v, _)) = ctx
        .sim
        .ha
        .resources
        .iter()
        .find(|(_, r)| r.group.as_deref() == Some(id.as_str()))
    {
        return Err(ErrorReply::die(format!(
            "delete ha group failed: ha group is used by service '{}'",
            sid(*v)
        )));
    }
    ctx.sim.ha.groups.remove(&id);
    ctx.sim.ha.generation += 1;
    Ok(Value::Null)
}
