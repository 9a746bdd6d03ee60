#!/usr/bin/env bash
# Venvs for `ansible-test sanity` on the built collections (tests/integration/galaxy/test_sanity.py):
# the project's ansible-core release (on the project's Python) and the newest release of every other minor
# that requires_ansible (>=2.16) admits, each on a Python its controller supports, each with the pinned requirements its ansible-test ships for its sanity tests
# (ansible_test/_data/requirements/sanity.*.txt: pylint, pycodestyle, yamllint, voluptuous,
# antsibull-changelog, ...), so the tests run with `--local` and need no container.
# The project release's venv also renders the collections' CHANGELOG.rst (antsibull-changelog).
#
# ansible-test runs each sanity test in a venv of its own under ~/.ansible/test/venv, made without pip and
# bootstrapped by a script it downloads from a host these machines cannot reach. The tests run it with
# HOME=$VENV/home, where this script puts tests/sanity/pip_bootstrap.py in that script's cache slot
# (ensurepip, then the pinned pip from PyPI); the per-test venvs are then cached there too.
#
# Idempotent and cached per machine under $PROXSHIFT_SANITY_VENVS (default /var/cache/proxshift):
# one venv ansible-sanity-VERSION per release. Prints `VERSION PYTHON_VERSION VENV_PATH` per venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/deps/lib/python.sh
ROOT=${PROXSHIFT_SANITY_VENVS:-/var/cache/proxshift}
PROJECT=$(sed -n 's/^ansible-core==//p' requirements-dev.txt)
PROJECT_PYTHON=${PROXSHIFT_VENV:-.venv}/bin/python
[ -x "$PROJECT_PYTHON" ] || PROJECT_PYTHON=python3
# ansible-core version : Python minor version (the project release: the project venv's Python). One per minor
# from requires_ansible's lowest to the newest (test_sanity.py checks that none is missing).
RELEASES=("$PROJECT:$("$PROJECT_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" 2.16.19:3.12 2.17.14:3.12 2.18.19:3.13 2.20.10:3.13 2.21.5:3.13)

for release in "${RELEASES[@]}"; do
    version=${release%%:*}
    minor=${release##*:}
    venv="$ROOT/ansible-sanity-$version"
    stamp="$venv/.stamp-ansible-core-$version-py$minor"
    if [ ! -e "$stamp" ]; then
        core_venv "$venv" "$minor" "$version"
        reqs=$("$venv/bin/python" -c 'import ansible_test, pathlib; print(pathlib.Path(ansible_test.__file__).parent / "_data/requirements")')
        args=()
        for f in "$reqs"/sanity.*.txt; do args+=(-r "$f"); done
        "$venv/bin/pip" install --quiet --disable-pip-version-check "${args[@]}" >&2
        touch "$stamp"
    fi
    pip_version=$("$venv/bin/python" -c 'import sys, types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version=sys.argv[1]))["pip"])' "$minor")
    mkdir -p "$venv/home/.ansible/test/cache"
    install -m 0644 tests/sanity/pip_bootstrap.py "$venv/home/.ansible/test/cache/get_pip_${pip_version//./_}.py"
    echo "$version $minor $venv"
done
