"""The kubelet of a control-plane node running a node debug Pod (the shape `oc debug node/<node>` gives it) and
the node's own `cluster-backup.sh`: what proxshift.openshift.etcd_backup's backup Pod meets on a real node.

- `BackupNodes`, for the Pods labelled `proxshift.io/etcd-backup` in `openshift-etcd`:
  * a Pod bound to a node whose kubelet is stopped (`KubeApi.stop_kubelet`) stays `Pending`, as on a node that is
    down; else, after `start_delay`, the container runs (`phase: Running`, `state.running`), as the kubelet reports
    it (kubernetes `pkg/kubelet/kubelet_pods.go` `generateAPIPodStatus`);
  * the container's command is checked for the node-debug shape (privileged, the host's `/` at `/host`, `chroot /host
    /bin/bash -c "$1"`) and its `$1`, the node script, runs as `chroot /host` would run it: in this node's own root,
    a folder per node standing for it. A chroot cannot be made here, so the one path the script is given,
    `BACKUP_DIR`, is moved under that folder, and `PATH` finds the node's `/usr/local/bin` there first; the
    environment is the container's (`env`, then `envFrom` the Secret, as the kubelet makes it:
    `pkg/kubelet/kubelet_pods.go` `makeEnvironmentVariables`);
  * the container ends as the kubelet ends it (`pkg/kubelet/kuberuntime/kuberuntime_container.go`
    `getTerminationMessage`): its termination message is what the command wrote to `/dev/termination-log` — here
    the node script's standard output on success, at most 4096 bytes — or, with `FallbackToLogsOnError` and no
    message, the last 80 lines (at most 2048 bytes) of its log; `phase: Succeeded` or `Failed` with the exit code
    (`Completed` / `Error`);
  * `activeDeadlineSeconds` past: the process killed, `phase: Failed`, `reason: DeadlineExceeded` ("Pod was active
    on the node longer than the specified deadline", `pkg/kubelet/active_deadline.go`).
- `cluster_backup_sh`: the node's `/usr/local/bin/cluster-backup.sh` as the cluster-etcd-operator installs it
  (openshift/cluster-etcd-operator `bindata/etcd/cluster-backup.sh`): the usage check, the folder made, the latest
  `static-pod-resources` of kube-apiserver, kube-controller-manager, kube-scheduler and etcd tarred as
  `static_kuberesources_<date>.tar.gz`, `etcdctl snapshot save` as `snapshot_<date>.db` (here 1.5 MB that differ
  every run), its messages, and on failure its ERR trap removing both files. Adversarial: `fail_first` runs fail
  as `etcdctl` does when no member answers in time ("context deadline exceeded").
"""
from __future__ import annotations

import base64
import os
import subprocess
import threading
import time
from pathlib import Path

from kube_fixtures import KubeApi
from standins.controller import FakeController

NS = "openshift-etcd"
LABEL = "proxshift.io/etcd-backup"
MESSAGE_MAX = 4096
LOG_LINES, LOG_MAX = 80, 2048

CLUSTER_BACKUP_SH = r"""#!/usr/bin/env bash
# Stand-in of the node's /usr/local/bin/cluster-backup.sh (openshift/cluster-etcd-operator bindata/etcd/cluster-backup.sh)
set -o errexit
set -o pipefail
set -o errtrace
if [ -z "$1" ] || [ -f "$1" ]; then
  echo 'Path to backup dir required: ./cluster-backup.sh <path-to-backup-dir>'
  exit 1
fi
if [ ! -d "$1" ]; then
  mkdir -p $1
fi
BACKUP_DIR="$1"
DATESTRING=$(date "+%F_%H%M%S")
BACKUP_TAR_FILE=${BACKUP_DIR}/static_kuberesources_${DATESTRING}.tar.gz
SNAPSHOT_FILE="${BACKUP_DIR}/snapshot_${DATESTRING}.db"
trap "rm -f ${BACKUP_TAR_FILE} ${SNAPSHOT_FILE}" ERR
CONFIG_FILE_DIR="$NODE_ROOT/etc/kubernetes"
LATEST=()
for RESOURCE in kube-apiserver-pod kube-controller-manager-pod kube-scheduler-pod etcd-pod; do
  LATEST_RESOURCE=$(ls -trd "${CONFIG_FILE_DIR}"/static-pod-resources/${RESOURCE}-[0-9]* | tail -1) || true
  echo "found latest ${RESOURCE}: /etc/kubernetes/${LATEST_RESOURCE#${CONFIG_FILE_DIR}/}"
  LATEST+=("${LATEST_RESOURCE#${CONFIG_FILE_DIR}/}")
done
tar -cpzf $BACKUP_TAR_FILE -C ${CONFIG_FILE_DIR} "${LATEST[@]}"
count=$(cat "$NODE_ROOT/runs" 2>/dev/null || echo 0)
echo $((count + 1)) > "$NODE_ROOT/runs"
if [ "$count" -lt "${FAIL_FIRST:-0}" ]; then
  echo '{"level":"warn","ts":"2026-12-07T10:15:02Z","caller":"clientv3/retry_interceptor.go:62","msg":"retrying of unary invoker failed","target":"etcd-endpoints://0xc0000a2000/192.168.1.11:2379","attempt":0,"error":"rpc error: code = DeadlineExceeded desc = context deadline exceeded"}'
  echo "Error: context deadline exceeded" >&2
  false
fi
head -c 1500000 /dev/urandom > ${SNAPSHOT_FILE}
echo "Snapshot saved at ${SNAPSHOT_FILE}"
echo "snapshot db and kube resources are successfully saved to ${BACKUP_DIR}"
"""


def node_root(base: Path, node: str) -> Path:
    """A node's root folder: its cluster-backup.sh and the static pod resources it tars."""
    root = base / node
    if not (root / "usr/local/bin/cluster-backup.sh").exists():
        (root / "usr/local/bin").mkdir(parents=True)
        script = root / "usr/local/bin/cluster-backup.sh"
        script.write_text(CLUSTER_BACKUP_SH)
        script.chmod(0o755)
        for res in ("kube-apiserver-pod", "kube-controller-manager-pod", "kube-scheduler-pod", "etcd-pod"):
            for rev in (6, 7):
                d = root / f"etc/kubernetes/static-pod-resources/{res}-{rev}"
                d.mkdir(parents=True)
                (d / "pod.yaml").write_text(f"# {res} revision {rev}\n")
    return root


class BackupNodes(FakeController):
    def __init__(self, api: KubeApi, base: Path, start_delay: float = 1.0, fail_first: int = 0):
        super().__init__()
        self.api, self.base, self.start_delay, self.fail_first = api, base, start_delay, fail_first
        self.seen: dict[str, float] = {}
        self.running: set[str] = set()
        self.ran: list[dict] = []  # per Pod run: name, node, rc, env names

    def tick(self) -> None:
        pods = self.api.ok("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector={LABEL}")["items"]
        for pod in pods:
            name = pod["metadata"]["name"]
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") or name in self.running:
                continue
            if pod["spec"]["nodeName"] in self._stopped():
                continue
            first = self.seen.setdefault(name, time.monotonic())
            if time.monotonic() - first >= self.start_delay:
                self.running.add(name)
                threading.Thread(target=self._run, args=(pod,), daemon=True).start()

    def _stopped(self) -> set[str]:
        path = Path(self.api.info["dir"]) / "stopped-kubelets"
        return set(path.read_text().split()) if path.exists() else set()

    def _status(self, name: str, status: dict) -> None:
        self.api.patch_status(f"/api/v1/namespaces/{NS}/pods/{name}", status)

    def _env(self, container: dict, node: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for e in container.get("env", []):
            env[e["name"]] = e.get("value", "")
        for src in container.get("envFrom", []):
            ref = src["secretRef"]["name"]
            secret = self.api.ok("GET", f"/api/v1/namespaces/{NS}/secrets/{ref}")
            env.update({k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()})
        root = node_root(self.base, node)
        env["BACKUP_DIR"] = str(root) + env["BACKUP_DIR"]
        env["PATH"] = f"{root}/usr/local/bin:{os.environ['PATH']}"
        env["NODE_ROOT"], env["FAIL_FIRST"] = str(root), str(self.fail_first)
        return env

    def _run(self, pod: dict) -> None:
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        [c] = pod["spec"]["containers"]
        assert c["securityContext"]["privileged"] is True and pod["spec"]["hostPID"] is True, pod
        assert {"name": "host", "mountPath": "/host"} in c["volumeMounts"], c
        assert c["command"][:2] == ["/bin/bash", "-c"] and 'chroot /host /bin/bash -c "$1"' in c["command"][2], c
        env = self._env(c, node)
        self._status(name, {"phase": "Running", "containerStatuses": [
            {"name": c["name"], "ready": True, "restartCount": 0, "image": c["image"], "imageID": "",
             "state": {"running": {"startedAt": "2026-12-07T10:15:00Z"}}}]})
        deadline = pod["spec"].get("activeDeadlineSeconds")
        try:
            proc = subprocess.run(["bash", "-c", c["command"][4]], env=env, capture_output=True, text=True,
                                  timeout=deadline)
        except subprocess.TimeoutExpired:
            self.ran.append({"name": name, "node": node, "rc": None})
            self._status(name, {"phase": "Failed", "reason": "DeadlineExceeded",
                                "message": "Pod was active on the node longer than the specified deadline"})
            return
        self.ran.append({"name": name, "node": node, "rc": proc.returncode, "env": sorted(env),
                         "log": proc.stderr})
        message = proc.stdout[-MESSAGE_MAX:] if proc.returncode == 0 else ""
        if not message and proc.returncode != 0 and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = "\n".join((proc.stdout + proc.stderr).splitlines()[-LOG_LINES:])[-LOG_MAX:]
        term = {"exitCode": proc.returncode, "reason": "Completed" if proc.returncode == 0 else "Error",
                "message": message, "startedAt": "2026-12-07T10:15:00Z", "finishedAt": "2026-12-07T10:15:09Z"}
        self._status(name, {"phase": "Succeeded" if proc.returncode == 0 else "Failed", "containerStatuses": [
            {"name": c["name"], "ready": False, "restartCount": 0, "image": c["image"], "imageID": "",
             "state": {"terminated": term}}]})
