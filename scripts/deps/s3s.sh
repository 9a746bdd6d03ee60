#!/usr/bin/env bash
# Build s3s-fs, a real S3 server (every request's Signature V4 checked, header and presigned), for the
# etcd backup tests: the object store the backups go to. Idempotent; cached per version. Prints the
# binary's path. The tests find it through S3S_FS_BIN, else this cache.
set -euo pipefail
VERSION=0.14.1
ROOT=${PROXSHIFT_S3S_ROOT:-/var/cache/proxshift/s3s-fs-$VERSION}
BIN="$ROOT/bin/s3s-fs"
if [ ! -x "$BIN" ]; then
    rm -rf "$ROOT.partial"
    mkdir -p "$(dirname "$ROOT")"
    # Its own target folder, removed after: the project's build cache stays the project's.
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    CARGO_TARGET_DIR="$tmp" cargo install --quiet --locked --version "$VERSION" --features binary \
        --root "$ROOT.partial" s3s-fs >&2
    rm -rf "$ROOT" && mv "$ROOT.partial" "$ROOT"
fi
echo "$BIN"
