#!/usr/bin/env bash
# Build portable release binaries and put the module binaries into their collections.
#
# cargo-zigbuild links against glibc 2.17 symbol versions, so the modules run in AWX/AAP execution
# environments on UBI8 (glibc 2.28) and UBI9. The build fails if a module needs a newer glibc symbol
# or is larger than 3 MB.
#
# Modules are built for x86_64 (into plugins/modules/, where Ansible's loader finds them) and aarch64
# (into builds/linux-aarch64/; the action shim in plugins/plugin_utils/binary_module.py sends the build
# that matches the target's `uname -m`). The tools (pvesim, the CLI, tests' probes) are x86_64 only.
set -euo pipefail
cd "$(dirname "$0")/.."

ARCHES=(x86_64 aarch64)
declare -A DEST_DIR=([x86_64]=plugins/modules [aarch64]=builds/linux-aarch64)
GLIBC=2.17
MAX_BYTES=$((3 * 1024 * 1024))

declare -A COLLECTION=(
  [proxmox_vm]=proxmox [vm_lifecycle]=proxmox [proxmox_access]=proxmox [hashicorp_vault]=hashi_vault
  [ocp_manifests]=openshift [acm_import]=openshift [cluster_auth]=openshift
  [proxmox_vm_info]=proxmox [hashicorp_vault_info]=hashi_vault [acm_cluster_info]=openshift
  [cluster_nodes]=openshift [cluster_upgrade]=openshift [cluster_config]=openshift
)

command -v cargo-zigbuild >/dev/null || { echo "cargo-zigbuild not found: run 'make venv'" >&2; exit 1; }
for arch in "${ARCHES[@]}"; do
  rustup target list --installed | grep -qx "$arch-unknown-linux-gnu" || rustup target add "$arch-unknown-linux-gnu"
done
cargo zigbuild --release --target "x86_64-unknown-linux-gnu.$GLIBC" --workspace --bins
packages=()
for m in "${!COLLECTION[@]}"; do packages+=(-p "$m"); done
cargo zigbuild --release --target "aarch64-unknown-linux-gnu.$GLIBC" "${packages[@]}" --bins

newest_glibc() {
  readelf -W --dyn-syms "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}

fail=0
for arch in "${ARCHES[@]}"; do
  out="${CARGO_TARGET_DIR:-target}/$arch-unknown-linux-gnu/release"
  for m in "${!COLLECTION[@]}"; do
    bin="$out/$m"
    size=$(stat -c %s "$bin")
    glibc=$(newest_glibc "$bin")
    printf '%-8s %-20s %8d bytes  newest glibc symbol %s\n' "$arch" "$m" "$size" "${glibc:-none}"
    if (( size > MAX_BYTES )); then echo "ERROR: $arch $m is larger than 3 MB" >&2; fail=1; fi
    if [[ -n "$glibc" ]] && [[ "$(printf '%s\n%s\n' "$glibc" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]]; then
      echo "ERROR: $arch $m needs GLIBC_$glibc, newer than $GLIBC" >&2; fail=1
    fi
    dest="ansible_collections/proxshift/${COLLECTION[$m]}/${DEST_DIR[$arch]}"
    mkdir -p "$dest"
    install -m 0755 "$bin" "$dest/$m"
  done
done
OUT="${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release"
install -m 0755 "$OUT/protocol_probe" tests/collections/ansible_collections/proxshift_test/probe/plugins/modules/protocol_probe
# ansible.cfg puts build/collections first: the checkout's collections win only once they hold binaries.
mkdir -p build/collections
ln -sfn ../../ansible_collections build/collections/ansible_collections
exit $fail
