#!/usr/bin/env bash
# Install qemu-user-static (Debian's user-mode emulator) and Debian's aarch64 glibc (libc6-arm64-cross,
# in /usr/aarch64-linux-gnu) so the tests run the aarch64 module builds on this x86_64 machine:
# tests/integration/protocol/test_aarch64.py calls `qemu-aarch64-static -L /usr/aarch64-linux-gnu`
# explicitly, so no binfmt_misc registration (which needs a privileged host) is involved. Idempotent;
# needs root for apt-get. Prints the emulator's path on stdout.
set -euo pipefail
QEMU=/usr/bin/qemu-aarch64-static
SYSROOT=/usr/aarch64-linux-gnu
if ! "$QEMU" --version >/dev/null 2>&1 || [[ ! -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ]]; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static \
        libc6-arm64-cross >&2
fi
"$QEMU" --version >/dev/null
echo "$QEMU"
