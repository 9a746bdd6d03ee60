#!/usr/bin/env bash
# Build portable release binaries and put the module binaries into their collections.
#
# cargo-zigbuild links against glibc 2.17 symbol versions, so the modules run in AWX/AAP execution
# environments on UBI8 (glibc 2.28) and UBI9. The build fails if a module needs a newer glibc symbol
# or is larger than 3 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

TRIPLE=x86_64-unknown-linux-gnu
GLIBC=2.17
MAX_BYTES=$((3 * 1024 * 1024))

declare -A COLLECTION=(
  [proxmox_vm]=proxmox [vm_lifecycle]=proxmox [proxmox_access]=proxmox [hashicorp_vault]=hashi_vault
  [ocp_manifests]=openshift [acm_import]=openshift [cluster_auth]=openshift
  [proxmox_vm_info]=proxmox [hashicorp_vault_info]=hashi_vault [acm_cluster_info]=openshift
  [cluster_nodes]=openshift [cluster_upgrade]=openshift [cluster_config]=openshift
)

command -v cargo-zigbuild >/dev/null || { echo "cargo-zigbuild not found: run 'make venv'" >&2; exit 1; }
cargo zigbuild --release --target "$TRIPLE.$GLIBC" --workspace --bins
OUT="${CARGO_TARGET_DIR:-target}/$TRIPLE/release"

newest_glibc() {
  objdump -T "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}

fail=0
for m in "${!COLLECTION[@]}"; do
  bin="$OUT/$m"
  size=$(stat -c %s "$bin")
  glibc=$(newest_glibc "$bin")
  printf '%-16s %8d bytes  newest glibc symbol %s\n' "$m" "$size" "${glibc:-none}"
  if (( size > MAX_BYTES )); then echo "ERROR: $m is larger than 3 MB" >&2; fail=1; fi
  if [[ -n "$glibc" ]] && [[ "$(printf '%s\n%s\n' "$glibc" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]]; then
    echo "ERROR: $m needs GLIBC_$glibc, newer than $GLIBC" >&2; fail=1
  fi
  dest="ansible_collections/proxshift/${COLLECTION[$m]}/plugins/modules/$m"
  install -m 0755 "$bin" "$dest"
done
install -m 0755 "$OUT/protocol_probe" tests/collections/ansible_collections/proxshift_test/probe/plugins/modules/protocol_probe
# ansible.cfg puts build/collections first: the checkout's collections win only once they hold binaries.
mkdir -p build/collections
ln -sfn ../../ansible_collections build/collections/ansible_collections
exit $fail
