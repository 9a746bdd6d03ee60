#!/usr/bin/env bash
# Build portable release binaries and put each collection's binary into it.
#
# cargo-zigbuild links against glibc 2.17 symbol versions, so the modules run in AWX/AAP execution
# environments on UBI8 (glibc 2.28) and UBI9. The build fails if a binary needs a newer glibc symbol,
# or a collection's binary is larger than its budget (the tarball holds one per architecture and must
# stay well inside Galaxy's 20 MB: tests/integration/galaxy/test_packaging.py checks ≤ 8 MB).
#
# Each collection's modules are one multi-call binary per architecture (crate modules/collection-binaries),
# builds/linux-<arch>/proxshift_<collection>; the action shim in plugins/plugin_utils/binary_module.py sends
# the build that matches the target's `uname -m`. The tools (pvesim, the CLI, tests' probes) are x86_64 only.
set -euo pipefail
cd "$(dirname "$0")/.."

ARCHES=(x86_64 aarch64)
COLLECTIONS=(proxmox hashi_vault openshift)
GLIBC=2.17
MAX_BYTES=$((7 * 1024 * 1024))

command -v cargo-zigbuild >/dev/null || { echo "cargo-zigbuild not found: run 'make venv'" >&2; exit 1; }
for arch in "${ARCHES[@]}"; do
  rustup target list --installed | grep -qx "$arch-unknown-linux-gnu" || rustup target add "$arch-unknown-linux-gnu"
done
cargo zigbuild --release --target "x86_64-unknown-linux-gnu.$GLIBC" -p collection-binaries --bins
cargo zigbuild --profile tools --target "x86_64-unknown-linux-gnu.$GLIBC" -p pvesim -p proxshift-cli \
  -p protocol-probe --bins
cargo zigbuild --release --target "aarch64-unknown-linux-gnu.$GLIBC" -p collection-binaries --bins

newest_glibc() {
  readelf -W --dyn-syms "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}

# Builds of the one-binary-per-module layout (plugins/modules/NAME, builds/linux-aarch64/NAME) would be packaged
# and found by Ansible's loader: plugins/modules/ holds only the documentation stubs now.
find ansible_collections/proxshift/*/plugins/modules -maxdepth 1 -type f ! -name '*.py' -delete
find ansible_collections/proxshift/*/builds -maxdepth 2 -type f ! -name 'proxshift_*' -delete 2>/dev/null || true

fail=0
for arch in "${ARCHES[@]}"; do
  out="${CARGO_TARGET_DIR:-target}/$arch-unknown-linux-gnu/release"
  for c in "${COLLECTIONS[@]}"; do
    bin="$out/proxshift_$c"
    size=$(stat -c %s "$bin")
    glibc=$(newest_glibc "$bin")
    printf '%-8s %-22s %9d bytes  newest glibc symbol %s\n' "$arch" "proxshift_$c" "$size" "${glibc:-none}"
    if (( size > MAX_BYTES )); then echo "ERROR: $arch proxshift_$c is larger than 7 MB" >&2; fail=1; fi
    if [[ -n "$glibc" ]] && [[ "$(printf '%s\n%s\n' "$glibc" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]]; then
      echo "ERROR: $arch proxshift_$c needs GLIBC_$glibc, newer than $GLIBC" >&2; fail=1
    fi
    dest="ansible_collections/proxshift/$c/builds/linux-$arch"
    mkdir -p "$dest"
    install -m 0755 "$bin" "$dest/proxshift_$c"
  done
done
TOOLS="${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/tools"
install -m 0755 "$TOOLS/protocol_probe" tests/collections/ansible_collections/proxshift_test/probe/plugins/modules/protocol_probe
mkdir -p build/bin
install -m 0755 "$TOOLS/pvesim" "$TOOLS/proxshift" build/bin/
# ansible.cfg puts build/collections first: the checkout's collections win only once they hold binaries.
mkdir -p build/collections
ln -sfn ../../ansible_collections build/collections/ansible_collections
exit $fail
