#!/usr/bin/env bash
# ansible-lint (production profile) over the collections, playbooks and roles.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_COLLECTIONS_PATH="$PWD"
targets=(ansible_collections/proxshift)
[ -d playbooks ] && targets+=(playbooks)
[ -d molecule ] && targets+=(molecule)
# ansible-test sanity's pep8 (E501 at 160 columns) runs late in `make test`; catch long lines here, in seconds.
long=$(git ls-files 'ansible_collections/*.py' | xargs awk 'length > 160 {print FILENAME ":" FNR ": " length " columns (pep8 E501: 160 at most)"}')
if [ -n "$long" ]; then echo "$long" >&2; exit 1; fi
exec ansible-lint --profile production --offline "${targets[@]}"
