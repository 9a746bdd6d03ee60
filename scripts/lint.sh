#!/usr/bin/env bash
# ansible-lint (production profile) over the collections, playbooks and roles.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_COLLECTIONS_PATH="$PWD"
targets=(ansible_collections/proxshift)
[ -d playbooks ] && targets+=(playbooks)
[ -d molecule ] && targets+=(molecule)
exec ansible-lint --profile production --offline "${targets[@]}"
