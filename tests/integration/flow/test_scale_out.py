"""playbooks/scale.yaml joining a host added to the cluster's inventory group, end to end: pvesim for the VMs,
OpenBao for the record, the real kube-apiserver playing the installed prod-ha cluster, and the test double
of `oc adm node-image create|monitor` (tests/fixtures/bin/oc) for the installer's day-2 flow.

The record says the cluster was installed with its masters and two workers; prod-ha-worker-2 of the example
inventory is therefore new. Its kubelet is played during the run, once its VM is started, by
standins/kubelet_join.py through the oc double's monitor hook, in a real kubelet's order (client CSR,
approved; Node NotReady; a second client CSR, left pending: the Node exists; serving CSR, approved; Ready). Pending from before the run: a CSR another machine
sent with the bootstrap identity for a name that is not joining, and a client CSR for the new host made
before its VM even existed (stale, as the machine-approver judges it): both must stay pending."""
from __future__ import annotations

import json
import shlex
import shutil
import sys

import yaml

from standins.cvo import cluster_at, set_version
from standins.kubelet import allow_csr_creation, approved, client_csr
from kube_fixtures import KubeApi, kube_api  # noqa: F401 (fixture)
from testlib import REPO

CLUSTER = "prod-ha"
INSTALLED = [f"{CLUSTER}-master-{i}" for i in range(3)] + [f"{CLUSTER}-worker-{i}" for i in range(2)]
NEW = f"{CLUSTER}-worker-2"
NEW_IP = "10.40.0.23"


def test_scale_out_joins_the_new_host_and_a_rerun_changes_nothing(run_flow, site, kube_api: KubeApi, tmp_path):
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {
        "phase": "installed", "kubeconfig": kube_api.kubeconfig(kube_api.kubeconfig_token),
        "agent_config": yaml.safe_dump({"hosts": [{"hostname": n, "role": "master" if "master" in n else "worker"}
                                                  for n in INSTALLED]})})
    allow_csr_creation(kube_api)
    stranger = client_csr(kube_api, f"{CLUSTER}-intruder")
    stale = client_csr(kube_api, NEW)
    calls = tmp_path / "oc-calls"
    info = tmp_path / "api.json"
    info.write_text(json.dumps(kube_api.info))
    hook = f"{shlex.quote(sys.executable)} {REPO}/tests/standins/kubelet_join.py {info} {NEW} \"$@\""
    env = {"PROXSHIFT_TEST_OC_CALLS": str(calls), "PROXSHIFT_TEST_ON_MONITOR": hook}
    with cluster_at(kube_api, "4.19.7"):
        _scale_out(run_flow, site, kube_api, tmp_path, env, calls, stranger, stale)


def _scale_out(run_flow, site, kube_api, tmp_path, env, calls, stranger, stale):
    try:
        # Bad input first: the new host with another host's MAC is refused by the day-1 rules, before
        # anything is created or any oc call.
        bad = tmp_path / "inventory"
        shutil.copytree(REPO / "inventory", bad)
        ha = yaml.safe_load((bad / "ha.yml").read_text())
        ha["all"]["children"]["clusters"]["children"][CLUSTER]["hosts"][NEW]["mac"] = "BC:24:11:40:00:21"
        (bad / "ha.yml").write_text(yaml.safe_dump(ha))
        seq = site.sim.last_seq()
        refused = run_flow("scale.yaml", CLUSTER, with_installer=True, env_more=env, inventory=bad)
        assert refused.rc != 0, refused.output
        assert "bc:24:11:40:00:21" in refused.output.lower() and NEW in refused.output, refused.output
        assert not [w for w in site.sim.writes_since(seq) if "qemu" in w and NEW in w]
        assert site.sim.vm_by_name(NEW) is None and not calls.exists()
        assert not approved(kube_api, stale)

        # No oc where scale.yaml will run `oc adm node-image`: refused before anything is created.
        no_oc = run_flow("scale.yaml", CLUSTER, with_installer=True, env_more=env, extra={"oc_binary": "/nonexistent/oc"})
        assert no_oc.rc != 0 and "/nonexistent/oc is not an executable file" in no_oc.output, no_oc.output
        assert site.sim.vm_by_name(NEW) is None and not calls.exists()

        # A 4.16 cluster: `oc adm node-image` needs 4.17; refused before anything is created, the way named.
        set_version(kube_api, "4.16.20")
        old = run_flow("scale.yaml", CLUSTER, with_installer=True, env_more=env)
        assert old.rc != 0 and "runs OpenShift 4.16.20" in old.output and "needs 4.17" in old.output, old.output
        assert "worker-user-data-managed" in old.output
        assert site.sim.vm_by_name(NEW) is None and not calls.exists()
        set_version(kube_api, "4.19.7")

        seq = site.sim.last_seq()
        run = run_flow("scale.yaml", CLUSTER, with_installer=True, env_more=env, extra={"scale_poll_interval": 1})
        assert run.rc == 0, run.output

        # The day-2 flow: nodes-config.yaml from the model (the same network as day 1), then create and monitor.
        day2 = site.work / CLUSTER / "day2"
        config = yaml.safe_load((day2 / "nodes-config.yaml").read_text())
        (host,) = config["hosts"]
        assert host["hostname"] == NEW and "role" not in host
        assert host["interfaces"][0]["macAddress"] == "bc:24:11:40:00:23"
        assert any(a["ip"] == NEW_IP for i in host["networkConfig"]["interfaces"]
                   for a in i.get("ipv4", {}).get("address", [])), host["networkConfig"]
        lines = calls.read_text().splitlines()
        assert [line.split(" --")[0] for line in lines] == ["adm node-image create", "adm node-image monitor"]
        assert f"--ip-addresses {NEW_IP}" in lines[1]
        assert not list(day2.glob("*.kubeconfig")), "the kubeconfig copy is removed"

        # Only the new host's VM was made, with the node ISO, and started; nothing deleted.
        writes = site.sim.writes_since(seq)
        assert not [w for w in writes if w.startswith("DELETE")], writes
        vm = site.sim.vm_by_name(NEW)
        assert vm and any(f"{CLUSTER}-node-" in v for v in vm[2].values()), vm
        assert len(site.owned_vms(CLUSTER)) == 6
        assert [w for w in writes if "/status/start" in w], "the new VM is started"

        # Exactly the new node's CSRs made after its VM started were approved; the stranger's and the stale one
        # stay pending.
        ready = run.task("Approve exactly the new nodes' CSRs and wait for them to be Ready")
        assert sorted((a["node"], a["kind"]) for a in ready["approved"]) == [(NEW, "client"), (NEW, "serving")], ready
        assert all(approved(kube_api, a["name"]) for a in ready["approved"])
        assert not approved(kube_api, stranger) and not approved(kube_api, stale)
        assert stranger in [u["name"] for u in ready["unexpected_csrs"]]
        skipped = {c["name"]: c["reason"] for c in ready["skipped_csrs"]}
        assert "before the VM" in skipped[stale], ready
        # The kubelet stand-in's second bootstrap client CSR, sent once its Node existed, stays pending.
        [again_client] = [n for n, why in skipped.items() if f"node {NEW} already exists" in why]
        assert not approved(kube_api, again_client)
        assert site.record(CLUSTER)["added_nodes"] == [NEW]

        seq = site.sim.last_seq()
        again = run_flow("scale.yaml", CLUSTER, with_installer=True, env_more=env)
        assert again.rc == 0, again.output
        assert not [w for w in site.sim.writes_since(seq) if not w.startswith("GET")], "a rerun changes nothing"
        assert len(calls.read_text().splitlines()) == 2, "no second node ISO"
    finally:
        kube_api.request("DELETE", f"/api/v1/nodes/{NEW}")


def test_a_dual_stack_host_joins_with_its_serving_csr_of_both_families(run_flow, site, kube_api: KubeApi, tmp_path):
    """lab-dual (compact, dual-stack) gets a worker: its kubelet's serving CSR carries its IPv4 and its IPv6
    address, and is approved because scale.yaml passes the node's addresses of both families."""
    cluster, host, ips = "lab-dual", "lab-dual-3", ["10.70.0.24", "fd00:70::24"]
    site.bao.kv_put(f"openshift/clusters/{cluster}", {
        "phase": "installed", "kubeconfig": kube_api.kubeconfig(kube_api.kubeconfig_token),
        "agent_config": yaml.safe_dump({"hosts": [{"hostname": f"{cluster}-{i}", "role": "master"} for i in range(3)]})})
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventory", inventory)
    dual = yaml.safe_load((inventory / "dual-stack.yml").read_text())
    dual["all"]["children"]["clusters"]["children"][cluster]["hosts"][host] = {
        "ip": ips[0], "secondary_ip": ips[1], "mac": "BC:24:11:70:00:24", "role": "worker"}
    (inventory / "dual-stack.yml").write_text(yaml.safe_dump(dual))
    allow_csr_creation(kube_api)
    info = tmp_path / "api.json"
    info.write_text(json.dumps(kube_api.info))
    hook = f"{shlex.quote(sys.executable)} {REPO}/tests/standins/kubelet_join.py {info} {host} {' '.join(ips)}"
    try:
        with cluster_at(kube_api, "4.19.7"):
            run = run_flow("scale.yaml", cluster, with_installer=True, inventory=inventory,
                           env_more={"PROXSHIFT_TEST_ON_MONITOR": hook}, extra={"scale_poll_interval": 1})
        assert run.rc == 0, run.output
        ready = run.task("Approve exactly the new nodes' CSRs and wait for them to be Ready")
        assert sorted((a["node"], a["kind"]) for a in ready["approved"]) == [(host, "client"), (host, "serving")], ready
        assert site.record(cluster)["added_nodes"] == [host]
    finally:
        kube_api.request("DELETE", f"/api/v1/nodes/{host}")
