#!/usr/bin/env bash
# `make demo`: the main job on the simulator.
#
# Starts pvesim (HTTPS, its own CA) seeded with demo/pvesim-seed.yaml and a dev OpenBao seeded with a demo
# pull secret and SSH key, runs playbooks/site.yaml for the `demo` cluster (preflight, secrets, manifests,
# VMs, start; the phases that need the real openshift-install run only when it is on PATH), prints a
# summary table, and stops both services.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
export PATH="$REPO/.venv/bin:$PATH"

DEMO_DIR=${PROXSHIFT_DEMO_DIR:-$REPO/.demo}
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
export PROXSHIFT_DEMO_DIR=$DEMO_DIR

PVESIM="$REPO/build/bin/pvesim"
[ -x "$PVESIM" ] || { echo "pvesim is not built: run 'make build'" >&2; exit 1; }
BAO=$(bash scripts/deps/vault.sh)

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_for_line() { # file pattern seconds
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "timed out waiting for '$2' in $1:" >&2
  cat "$1" >&2
  return 1
}

echo "== starting pvesim (HTTPS, 3 simulated nodes)"
"$PVESIM" --listen 127.0.0.1:0 --tls --ca-out "$DEMO_DIR/pvesim-ca.pem" --seed demo/pvesim-seed.yaml \
  --time-scale 0.02 --auth-delay-ms 0 --dump-state "$DEMO_DIR/pvesim-state.yaml" >"$DEMO_DIR/pvesim.log" 2>&1 &
PIDS+=($!)
wait_for_line "$DEMO_DIR/pvesim.log" "listening on" 30
PVE_URL=$(grep -o 'https://[^ ]*' "$DEMO_DIR/pvesim.log" | head -1)
PVE_PORT=$(echo "$PVE_URL" | sed -E 's#https://[^:]+:([0-9]+)/.*#\1#')
echo "   $PVE_URL"

echo "== starting OpenBao (dev mode) with a demo pull secret and SSH key"
BAO_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
BAO_TOKEN="demo-root-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
"$BAO" server -dev -dev-root-token-id="$BAO_TOKEN" -dev-listen-address="127.0.0.1:$BAO_PORT" >"$DEMO_DIR/openbao.log" 2>&1 &
PIDS+=($!)
export VAULT_ADDR="http://127.0.0.1:$BAO_PORT" VAULT_TOKEN="$BAO_TOKEN"
for _ in $(seq 100); do curl -sf "$VAULT_ADDR/v1/sys/health" >/dev/null && break; sleep 0.1; done
PULL_SECRET='{"auths":{"cloud.openshift.com":{"auth":"ZGVtbzpkZW1v","email":"demo@proxshift.test"}}}'
SSH_KEY=$(python3 -c 'import base64,os; b=b"\0\0\0\x0bssh-ed25519\0\0\0\x20"+os.urandom(32); print("ssh-ed25519 "+base64.b64encode(b).decode()+" demo@proxshift")')
"$BAO" kv put -mount=secret openshift/pull-secret pullSecret="$PULL_SECRET" >/dev/null
"$BAO" kv put -mount=secret openshift/ssh publicKey="$SSH_KEY" >/dev/null
echo "   $VAULT_ADDR"

echo "== ansible-playbook playbooks/site.yaml -e cluster_name=demo"
export PROXMOX_TOKEN_SECRET=0d3e6f2a-demo-4b1c-9c55-proxshift0001
set +e
ansible-playbook -i demo/inventory playbooks/site.yaml -e cluster_name=demo \
  -e proxmox_api_port="$PVE_PORT" -e proxmox_ca_path="$DEMO_DIR/pvesim-ca.pem" -e vault_url="$VAULT_ADDR" \
  "$@"
rc=$?
set -e

echo
echo "== summary"
python3 scripts/demo_summary.py "${PVE_URL%/api2/json}" "$DEMO_DIR/clusters/demo"
exit $rc
