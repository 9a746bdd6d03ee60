#!/usr/bin/env bash
# cargo-fuzz for the fuzz targets under fuzz/ (nightly toolchain + libFuzzer). Idempotent: installs once,
# building in a cached target dir under /var/cache/proxshift so a rerun costs nothing.
set -euo pipefail
VERSION=0.13.2
if command -v cargo-fuzz >/dev/null && cargo-fuzz --version 2>/dev/null | grep -q "$VERSION"; then
  echo "cargo-fuzz $VERSION already installed"; exit 0
fi
# The fuzz targets build with nightly; scripts/fuzz.sh falls back to stable + RUSTC_BOOTSTRAP=1 when no
# nightly can be installed, so a failure here is not fatal.
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal || \
  echo "fuzz.sh: no nightly toolchain could be installed; fuzzing will use stable with RUSTC_BOOTSTRAP=1" >&2
CACHE=/var/cache/proxshift/cargo-fuzz
mkdir -p "$CACHE" 2>/dev/null || CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/proxshift/cargo-fuzz"
mkdir -p "$CACHE"
CARGO_TARGET_DIR="$CACHE/target" cargo install --locked --version "$VERSION" cargo-fuzz
