#!/usr/bin/env bash
# Install nmstatectl, the tool openshift-install runs on the build host to check each host's static
# network config (and ocp_manifests' `nmstatectl gc` check), for the flow tests. Debian 12 has no nmstate
# package, so it is built from crates.io (nmstate's own crate, Apache-2.0) with only the `gen_conf`
# feature: `nmstatectl gc` needs no NetworkManager. Idempotent and cached per machine (the first build
# takes a few minutes); prints the path of `nmstatectl` on stdout.
set -euo pipefail
VERSION=2.2.62
ROOT=${PROXSHIFT_NMSTATE_ROOT:-/var/cache/proxshift/nmstatectl-$VERSION}
BIN="$ROOT/bin/nmstatectl"
if ! "$BIN" --version 2>/dev/null | grep -q "$VERSION"; then
    mkdir -p "$ROOT"
    # Optimised lightly: the tests run `nmstatectl gc` a few times, and a cold machine builds it in `make test`.
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --quiet --locked nmstatectl --version "$VERSION" \
        --no-default-features --features gen_conf --root "$ROOT" >&2
    "$BIN" --version | grep -q "$VERSION" || { echo "nmstatectl installed but $BIN is not $VERSION" >&2; exit 1; }
fi
echo "$BIN"
