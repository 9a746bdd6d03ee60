"""etcd_backup.yaml end to end (#46): the real kube-apiserver playing the installed prod-ha cluster, OpenBao for its
record, s3s-fs (a real S3 server that checks every signature) as the off-cluster object store, and the stand-in of
`standins/node_debug.py` playing the control-plane nodes' kubelets and their `cluster-backup.sh`.

master-0 is down (NotReady, its kubelet gone), so the backup runs on master-1. Check mode says so and touches
nothing. The first backup fails on the node the way etcdctl fails when no member answers in time: the run fails
naming the reason and the Pod kept for its log, nothing is in the store or the record, the upload URLs' Secret is
gone. The rerun stores both files (uploaded by the node itself through presigned URLs, the store's keys given to
the module by AWX's AWS credential variables, never to the cluster) and records them with the sizes and SHA-256 the
node computed, which match what the store holds; the node's folder is removed. Retention keeps the newest two. A
store that refuses the keys stops the run before any Pod is made."""
from __future__ import annotations

import hashlib

import pytest
import yaml

from kube_fixtures import KubeApi, condition, kube_api  # noqa: F401 (fixture)
from services import S3_ACCESS_KEY, S3_SECRET_CANARY, running_s3
from standins.node_debug import LABEL, NS, BackupNodes

CLUSTER = "prod-ha"
MASTERS = [f"{CLUSTER}-master-{i}" for i in range(3)]
WORKER = f"{CLUSTER}-worker-0"
IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "e" * 64
PREFIX = f"proxshift/etcd/{CLUSTER}"


@pytest.fixture
def store(tmp_path):
    with running_s3(tmp_path) as s3:
        yield s3


@pytest.fixture
def installed(kube_api: KubeApi, site):
    """prod-ha as installed: its record, three masters (master-0 down) and a worker, etcd's static pods."""
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {
        "phase": "installed", "version": "4.19.7", "kubeconfig": kube_api.kubeconfig(kube_api.kubeconfig_token),
        "agent_config": yaml.safe_dump({"hosts": [{"hostname": n, "role": "master"} for n in MASTERS]})})
    status, out = kube_api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                  "metadata": {"name": NS}})
    assert status in (201, 409), out
    for n in MASTERS + [WORKER]:
        role = "worker" if n == WORKER else "master"
        kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": n, "labels": {f"node-role.kubernetes.io/{role}": ""}}})
        kube_api.patch_status(f"/api/v1/nodes/{n}", {"conditions": [
            condition("Ready", "False" if n == MASTERS[0] else "True")]})
    kube_api.stop_kubelet(MASTERS[0])
    for m in MASTERS:
        kube_api.ok("POST", f"/api/v1/namespaces/{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"etcd-{m}"}, "spec": {"nodeName": m, "containers": [
                {"name": "etcdctl", "image": "registry.example.com/other"}, {"name": "etcd", "image": IMAGE}]}})
    yield
    for p in kube_api.ok("GET", f"/api/v1/namespaces/{NS}/pods")["items"]:
        kube_api.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}",
                         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    for n in MASTERS + [WORKER]:
        kube_api.request("DELETE", f"/api/v1/nodes/{n}")
    kube_api.start_kubelet(MASTERS[0])


def backup_vars(store, **more) -> dict:
    return {"etcd_backup_store": {"endpoint_url": store.endpoint, "bucket": store.bucket, **more},
            "etcd_backup_poll_interval": 1}


CREDENTIALS = {"AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_CANARY}


def backup_pods(kube_api: KubeApi) -> list[dict]:
    return kube_api.ok("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector={LABEL}")["items"]


def url_secrets(kube_api: KubeApi) -> list[str]:
    return [s["metadata"]["name"] for s in kube_api.ok("GET", f"/api/v1/namespaces/{NS}/secrets?labelSelector={LABEL}")["items"]]


def test_an_etcd_backup_is_taken_on_a_ready_master_stored_off_cluster_and_recorded(
        run_flow, site, kube_api: KubeApi, installed, store, tmp_path):
    nodes_root = tmp_path / "nodes"
    version = site.record_version(CLUSTER)

    check = run_flow("etcd_backup.yaml", CLUSTER, check=True, extra=backup_vars(store), env_more=CREDENTIALS)
    assert check.rc == 0, check.output
    predicted = check.task("Take the etcd backup")
    assert predicted["changed"] is True and predicted["node"] == MASTERS[1], predicted
    assert backup_pods(kube_api) == [] and store.objects() == {} and site.record_version(CLUSTER) == version

    with BackupNodes(kube_api, nodes_root, fail_first=1) as nodes:
        failed = run_flow("etcd_backup.yaml", CLUSTER, extra=backup_vars(store), env_more=CREDENTIALS)
        assert failed.rc != 0
        msg = failed.task("Take the etcd backup")["msg"]
        assert f"the backup on {MASTERS[1]} failed (exit code 1, Error:" in msg and "context deadline exceeded" in msg, msg
        [kept] = backup_pods(kube_api)
        assert kept["status"]["phase"] == "Failed" and kept["metadata"]["name"] in msg
        assert store.objects() == {} and "etcd_backups" not in site.record(CLUSTER)
        assert url_secrets(kube_api) == []

        run = run_flow("etcd_backup.yaml", CLUSTER, extra=backup_vars(store), env_more=CREDENTIALS)
        assert run.rc == 0, run.output
        assert [r["node"] for r in nodes.ran] == [MASTERS[1], MASTERS[1]]
        assert {"SNAPSHOT_URL", "RESOURCES_URL"} <= set(nodes.ran[-1]["env"])
        assert not any(k.startswith("AWS_") for k in nodes.ran[-1]["env"]), "the store's keys stay off the cluster"

    [entry] = site.record(CLUSTER)["etcd_backups"]
    name = entry["name"]
    assert name.startswith("etcd-") and entry["node"] == MASTERS[1] and entry["version"] == "4.19.7", entry
    assert entry["location"] == f"s3://{store.bucket}/{PREFIX}/{name}/"
    objects = store.objects()
    assert sorted(objects) == [f"{PREFIX}/{name}/snapshot.db", f"{PREFIX}/{name}/static_kuberesources.tar.gz"]
    for f in entry["files"]:
        body = objects[f["object"]]
        assert (f["size"], f["sha256"]) == (len(body), hashlib.sha256(body).hexdigest()), f
    snapshot = next(f for f in entry["files"] if f["role"] == "snapshot")
    assert snapshot["size"] == 1_500_000 and snapshot["name"].startswith("snapshot_"), snapshot
    assert not (nodes_root / MASTERS[1] / "var/lib/proxshift/etcd-backup" / name).exists()
    assert [p["status"]["phase"] for p in backup_pods(kube_api)] == ["Failed"], "the successful Pod is deleted"
    assert url_secrets(kube_api) == []
    for out in (check.output, failed.output, run.output):
        assert S3_SECRET_CANARY not in out and "X-Amz-Signature" not in out

    # Two more, keeping two: the first backup leaves the store and the record.
    with BackupNodes(kube_api, nodes_root):
        for later in ("etcd-later-1", "etcd-later-2"):
            more = run_flow("etcd_backup.yaml", CLUSTER, env_more=CREDENTIALS,
                            extra={**backup_vars(store), "etcd_backup_name": later, "etcd_backup_keep": 2})
            assert more.rc == 0, more.output
    assert [b["name"] for b in site.record(CLUSTER)["etcd_backups"]] == ["etcd-later-1", "etcd-later-2"]
    assert more.task("Take the etcd backup")["pruned"] == [name]
    assert sorted({k.split("/")[3] for k in store.objects()}) == ["etcd-later-1", "etcd-later-2"]


def test_a_store_that_refuses_the_keys_stops_the_backup_before_any_pod(run_flow, site, kube_api: KubeApi, installed,
                                                                       store):
    wrong = {**CREDENTIALS, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    run = run_flow("etcd_backup.yaml", CLUSTER, extra=backup_vars(store), env_more=wrong)
    assert run.rc != 0
    msg = run.task("Take the etcd backup")["msg"]
    assert "object store:" in msg and "HTTP 403" in msg and "access_key and secret_key" in msg, msg
    assert backup_pods(kube_api) == [] and url_secrets(kube_api) == [] and store.objects() == {}
    missing = run_flow("etcd_backup.yaml", CLUSTER, extra={}, env_more=CREDENTIALS)
    assert missing.rc != 0 and "etcd_backup_store (endpoint_url, bucket) is not set" in missing.output
