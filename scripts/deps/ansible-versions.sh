#!/usr/bin/env bash
# One venv per supported ansible-core release other than the project venv's (2.19), for the protocol
# suite under each (tests/integration/protocol: `ansible_venv` parametrises it over these venvs).
# Each release runs on a Python it supports as a controller: 2.16 supports 3.10-3.12, 2.18 3.11-3.13,
# 2.21 (the newest 2.2x) 3.12-3.14. Python 3.12 and 3.13 come from pyenv (or python3.X on PATH).
#
# Idempotent and cached per machine under $PROXSHIFT_ANSIBLE_VENVS (default
# /var/cache/proxshift/ansible-core); a venv whose stamp exists is not touched. Prints one line per
# venv on stdout: `VERSION PYTHON_VERSION VENV_PATH`.
set -euo pipefail
ROOT=${PROXSHIFT_ANSIBLE_VENVS:-/var/cache/proxshift/ansible-core}
# ansible-core version : Python minor version.
RELEASES=(2.16.19:3.11 2.18.19:3.12 2.21.5:3.13)

. "$(dirname "$0")/lib/python.sh"

for release in "${RELEASES[@]}"; do
    version=${release%%:*}
    minor=${release##*:}
    venv="$ROOT/$version-py$minor"
    stamp="$venv/.stamp-ansible-core-$version"
    if [ ! -e "$stamp" ]; then
        core_venv "$venv" "$minor" "$version"
        reported=$("$venv/bin/ansible" --version)
        [[ "$reported" == *"core $version]"* ]] ||
            { echo "ansible-versions.sh: $venv does not run ansible-core $version" >&2; exit 1; }
        touch "$stamp"
    fi
    echo "$version $minor $venv"
done
