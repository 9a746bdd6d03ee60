#!/usr/bin/env bash
# cargo-fuzz for the fuzz targets under fuzz/ (nightly toolchain + libFuzzer). Idempotent: installs once,
# building in a cached target dir under /var/cache/proxshift so a rerun costs nothing.
set -euo pipefail
VERSION=0.13.2
if command -v cargo-fuzz >/dev/null && cargo-fuzz --version 2>/dev/null | grep -q "$VERSION"; then
  echo "cargo-fuzz $VERSION already installed"; exit 0
fi
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
CACHE=/var/cache/proxshift/cargo-fuzz
mkdir -p "$CACHE" 2>/dev/null || CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/proxshift/cargo-fuzz"
mkdir -p "$CACHE"
CARGO_TARGET_DIR="$CACHE/target" cargo install --locked --version "$VERSION" cargo-fuzz
