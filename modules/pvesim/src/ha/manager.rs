//! The CRM loop over simulated time: a node that goes offline is first `fence`d (its services
//! wait; `PVE::HA::Manager::next_state_started` on a node in state `unknown`, then
//! `fence_node`), and only once the fence delay has passed (the watchdog's self-fence, never
//! instant: at least one second and one tick later) are its services `recovery`ed onto a node
//! `placement::select_node` picks (`PVE::HA::Manager::recover_fenced_service`); one with no
//! allowed node stays in `recovery` (`next_state_recovery`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::placement::{select_node, NodeAffinity, Request};
use super::{HaResource, Requested, RuleKind, ServiceState};
use crate::ops::power::{power_off, start_vm};
use crate::sim::{Generation, Sim};

impl Sim {
    /// Makes `vmid` an HA resource (or replaces its config); `vm.ha` follows.
    pub fn ha_add(&mut self, vmid: u32, res: HaResource) {
        if let Some(vm) = self.vms.get_mut(&vmid) {
            vm.ha = true;
        }
        self.ha.resources.insert(vmid, res);
        self.ha.generation += 1;
    }

    /// Removes an HA resource; with `purge` also from every rule (rules left without resources
    /// go), as qemu-server's destroy with `purge` calls
    /// `PVE::HA::Config::delete_service_from_config`.
    pub fn ha_remove(&mut self, vmid: u32, purge: bool) -> bool {
        if let Some(vm) = self.vms.get_mut(&vmid) {
            vm.ha = false;
        }
        let had = self.ha.resources.remove(&vmid).is_some();
        if purge {
            for r in self.ha.rules.values_mut() {
                r.resources.remove(&vmid);
            }
            self.ha.rules.retain(|_, r| !r.resources.is_empty());
        }
        self.ha.generation += 1;
        had
    }

    /// Carries out a requested state at once (the LRM acting on the CRM's decision): `started`
    /// starts a stopped VM on an online node, `stopped`/`disabled` stop it.
    pub fn ha_apply_request(&mut self, vmid: u32) {
        let Some(res) = self.ha.resources.get(&vmid) else {
            return;
        };
        let state = res.state;
        let Some(vm) = self.vms.get(&vmid) else {
            return;
        };
        let online = self.nodes.get(&vm.node).is_some_and(|n| n.online);
        let running = vm.running();
        let service = match state {
            Requested::Ignored => ServiceState::Ignored,
            Requested::Stopped | Requested::Disabled => {
                if running {
                    power_off(self, vmid);
                }
                ServiceState::Stopped
            }
            Requested::Started if !online => return,
            Requested::Started if running => ServiceState::Started,
            Requested::Started => match start_vm(self, vmid, &mut Vec::new()) {
                Ok(_) => ServiceState::Started,
                Err(_) => ServiceState::Error,
            },
        };
        if let Some(r) = self.ha.resources.get_mut(&vmid) {
            r.service = service;
        }
    }

    fn online_nodes(&self) -> BTreeSet<String> {
        self.nodes
            .values()
            .filter(|n| n.online)
            .map(|n| n.name.clone())
            .collect()
    }

    /// The HA services whose VM sits on `node`.
    fn services_on(&self, node: &str) -> Vec<u32> {
        self.ha
            .resources
            .keys()
            .copied()
            .filter(|v| self.vms.get(v).is_some_and(|vm| vm.node == node))
            .collect()
    }

    fn set_service(&mut self, vmid: u32, from: &[ServiceState], to: ServiceState) {
        if let Some(r) = self.ha.resources.get_mut(&vmid) {
            if from.contains(&r.service) {
                r.service = to;
            }
        }
    }

    /// One CRM round: notice lost nodes, fence them after the delay, recover their services,
    /// then move started services back to the nodes their affinity prefers (failback).
    pub(crate) fn ha_tick(&mut self) {
        if self.ha.resources.is_empty() {
            return;
        }
        let online = self.online_nodes();
        let now = self.now();
        let delay = self
            .scaled(self.opts.ha_fence_delay)
            .max(Duration::from_secs(1));
        for node in self.nodes.keys().cloned().collect::<Vec<_>>() {
            let up = online.contains(&node);
            if up {
                self.ha.fenced.remove(&node);
                if self.ha.fencing.remove(&node).is_some() {
                    // Back before it was fenced: its services never left.
                    for v in self.services_on(&node) {
                        self.set_service(v, &[ServiceState::Fence], ServiceState::Started);
                    }
                }
                continue;
            }
            if self.ha.fenced.contains(&node) {
                continue;
            }
            match self.ha.fencing.get(&node).copied() {
                None => {
                    self.ha.fencing.insert(node.clone(), now + delay);
                    for v in self.services_on(&node) {
                        let live = [ServiceState::Started, ServiceState::Error];
                        self.set_service(v, &live, ServiceState::Fence);
                    }
                }
                Some(at) if at <= now => {
                    self.ha.fencing.remove(&node);
                    self.ha.fenced.insert(node.clone());
                    for v in self.services_on(&node) {
                        power_off(self, v);
                        self.set_service(v, &[ServiceState::Fence], ServiceState::Recovery);
                    }
                }
                Some(_) => {}
            }
        }
        self.ha_recover(&online);
        self.ha_failback(&online);
    }

    /// The node affinity of a service: its enabled `node-affinity` rule (PVE 9, the first by
    /// creation order) or its group (PVE 8).
    fn node_affinity(&self, vmid: u32) -> Option<NodeAffinity> {
        match self.version.generation() {
            Generation::Pve9 => self
                .ha
                .rules
                .values()
                .filter(|r| !r.disable && r.resources.contains(&vmid))
                .filter_map(|r| match &r.kind {
                    RuleKind::NodeAffinity { nodes, strict } => Some((r.order, nodes, *strict)),
                    RuleKind::ResourceAffinity { .. } => None,
                })
                .min_by_key(|(order, _, _)| *order)
                .map(|(_, nodes, strict)| NodeAffinity {
                    nodes: nodes.clone(),
                    strict,
                }),
            Generation::Pve8 => {
                let group = self.ha.resources.get(&vmid)?.group.as_ref()?;
                let g = self.ha.groups.get(group)?;
                Some(NodeAffinity {
                    nodes: g.nodes.clone(),
                    strict: g.restricted,
                })
            }
        }
    }

    /// Online nodes of the services `vmid` must be kept with (`true`) or apart from (`false`),
    /// per the enabled resource-affinity rules (`get_resource_affinity`).
    fn partner_nodes(
        &self,
        vmid: u32,
        online: &BTreeSet<String>,
        positive: bool,
    ) -> BTreeSet<String> {
        self.ha
            .rules
            .values()
            .filter(|r| !r.disable && r.resources.contains(&vmid))
            .filter(|r| r.kind == RuleKind::ResourceAffinity { positive })
            .flat_map(|r| r.resources.iter())
            .filter(|p| **p != vmid)
            .filter(|p| {
                self.ha
                    .resources
                    .get(p)
                    .is_some_and(|s| s.service != ServiceState::Recovery)
            })
            .filter_map(|p| self.vms.get(p).map(|vm| vm.node.clone()))
            .filter(|n| online.contains(n))
            .collect()
    }

    fn ha_recover(&mut self, online: &BTreeSet<String>) {
        let waiting: Vec<u32> = self
            .ha
            .resources
            .iter()
            .filter(|(_, r)| r.service == ServiceState::Recovery)
            .map(|(v, _)| *v)
            .collect();
        for vmid in waiting {
            let load = self.service_load();
            let affinity = self.node_affinity(vmid);
            let separate = self.partner_nodes(vmid, online, false);
            let together = self.partner_nodes(vmid, online, true);
            let target = select_node(&Request {
                online,
                affinity: affinity.as_ref(),
                separate: &separate,
                together: &together,
                load: &load,
            });
            let Some(target) = target else { continue };
            let Some(vm) = self.vms.get_mut(&vmid) else {
                continue;
            };
            vm.node = target;
            self.ha_apply_request(vmid);
        }
    }

    /// HA services per node, those waiting in `recovery` left out (the `basic` scheduler's
    /// `online_node_usage`).
    fn service_load(&self) -> BTreeMap<String, usize> {
        let mut load: BTreeMap<String, usize> = BTreeMap::new();
        for (v, r) in &self.ha.resources {
            if r.service == ServiceState::Recovery {
                continue;
            }
            if let Some(vm) = self.vms.get(v) {
                *load.entry(vm.node.clone()).or_default() += 1;
            }
        }
        load
    }

    /// Whether a service goes back to the node its affinity prefers: PVE 8's group unless it
    /// says `nofailback`, PVE 9's resource `failback` (default on).
    fn fails_back(&self, vmid: u32) -> bool {
        let Some(res) = self.ha.resources.get(&vmid) else {
            return false;
        };
        match self.version.generation() {
            Generation::Pve9 => res.failback.unwrap_or(true),
            Generation::Pve8 => res
                .group
                .as_ref()
                .and_then(|g| self.ha.groups.get(g))
                .is_some_and(|g| !g.nofailback),
        }
    }

    /// `next_state_started` → `select_service_node` without `try_next`: a started service on a
    /// node below the highest priority class its node affinity has online (its group's preferred
    /// node back after a failure, or a group given to a running VM) is migrated to that class's
    /// least loaded node, live (`change_service_state(..., 'migrate')`). One already in the top
    /// class stays (upstream returns `$current_node` when it is found there), and so does one
    /// that does not fail back, on a node it may run on. Without an affinity every online node
    /// is one class, so nothing moves.
    fn ha_failback(&mut self, online: &BTreeSet<String>) {
        let started: Vec<u32> = self
            .ha
            .resources
            .iter()
            .filter(|(_, r)| r.state == Requested::Started && r.service == ServiceState::Started)
            .map(|(v, _)| *v)
            .collect();
        for vmid in started {
            let Some(affinity) = self.node_affinity(vmid) else {
                continue;
            };
            let Some(current) = self.vms.get(&vmid).map(|vm| vm.node.clone()) else {
                continue;
            };
            let top = online.iter().filter_map(|n| affinity.priority(n)).max();
            let here = affinity.priority(&current);
            if top.is_none() || here == top || (here.is_some() && !self.fails_back(vmid)) {
                continue;
            }
            let load = self.service_load();
            let separate = self.partner_nodes(vmid, online, false);
            let together = self.partner_nodes(vmid, online, true);
            let target = select_node(&Request {
                online,
                affinity: Some(&affinity),
                separate: &separate,
                together: &together,
                load: &load,
            });
            if let (Some(target), Some(vm)) = (target, self.vms.get_mut(&vmid)) {
                vm.node = target;
            }
        }
    }
}
