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
# A fresh clone of sources built before takes their outputs from the machine's cache (scripts/lib/build-outputs.sh:
# keyed by the sources' contents and the toolchain, since cargo's own freshness check goes by mtimes).
# shellcheck source=scripts/lib/build-outputs.sh
. scripts/lib/build-outputs.sh
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
TOOL_BINS=(pvesim proxshift protocol_probe)
key=$(build_outputs_key build Cargo.toml Cargo.lock modules scripts/build.sh scripts/lib/build-outputs.sh -- \
  "$GLIBC" "$(rustc -Vv)" "$(cargo -V)" "$(cargo zigbuild --version 2>&1)" \
  "$(python3 -m ziglang version 2>/dev/null || zig version 2>/dev/null || true)")
if cached=$(build_outputs_fetch "$key"); then
  echo "build: outputs of these sources from $cached (scripts/lib/build-outputs.sh)"
  bin_path() { echo "$cached/$1-$2"; }  # ARCH NAME
  tool_path() { echo "$cached/tools-$1"; }
else
  cargo zigbuild --release --target "x86_64-unknown-linux-gnu.$GLIBC" -p collection-binaries --bins
  cargo zigbuild --profile tools --target "x86_64-unknown-linux-gnu.$GLIBC" -p pvesim -p proxshift-cli \
    -p protocol-probe --bins
  cargo zigbuild --release --target "aarch64-unknown-linux-gnu.$GLIBC" -p collection-binaries --bins
  bin_path() { echo "$TARGET_DIR/$1-unknown-linux-gnu/release/$2"; }
  tool_path() { echo "$TARGET_DIR/x86_64-unknown-linux-gnu/tools/$1"; }
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  for arch in "${ARCHES[@]}"; do
    for c in "${COLLECTIONS[@]}"; do cp -p "$(bin_path "$arch" "proxshift_$c")" "$stage/$arch-proxshift_$c"; done
  done
  for t in "${TOOL_BINS[@]}"; do cp -p "$(tool_path "$t")" "$stage/tools-$t"; done
fi

newest_glibc() {
  readelf -W --dyn-syms "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}

# Builds of the one-binary-per-module layout (plugins/modules/NAME, builds/linux-aarch64/NAME) would be packaged
# and found by Ansible's loader: plugins/modules/ holds only the documentation stubs now.
find ansible_collections/proxshift/*/plugins/modules -maxdepth 1 -type f ! -name '*.py' -delete
find ansible_collections/proxshift/*/builds -maxdepth 2 -type f ! -name 'proxshift_*' -delete 2>/dev/null || true

fail=0
for arch in "${ARCHES[@]}"; do
  for c in "${COLLECTIONS[@]}"; do
    bin="$(bin_path "$arch" "proxshift_$c")"
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
install -m 0755 "$(tool_path protocol_probe)" \
  tests/collections/ansible_collections/proxshift_test/probe/plugins/modules/protocol_probe
mkdir -p build/bin
install -m 0755 "$(tool_path pvesim)" build/bin/pvesim
install -m 0755 "$(tool_path proxshift)" build/bin/proxshift
# Only outputs that passed the checks above are kept for the next clone of these sources.
if (( fail == 0 )) && [ -n "${stage:-}" ]; then build_outputs_store "$key" "$stage"/*; fi
# ansible.cfg puts build/collections first: the checkout's collections win only once they hold binaries.
mkdir -p build/collections
ln -sfn ../../ansible_collections build/collections/ansible_collections
exit $fail
