#!/usr/bin/env bash
# A venv for `ansible-test sanity` on the built collections (tests/integration/galaxy): the project's
# ansible-core release plus the pinned requirements that release's ansible-test ships for its sanity
# tests (ansible_test/_data/requirements/sanity.*.txt: pylint, pycodestyle, yamllint, voluptuous,
# antsibull-changelog, ...), so the tests run with `--local` and need no container or network.
# Also holds antsibull-changelog, which renders the collections' CHANGELOG.rst from
# changelogs/changelog.yaml.
#
# ansible-test runs each sanity test in a venv of its own under ~/.ansible/test/venv, made without pip and
# bootstrapped by a script it downloads from a host these machines cannot reach. The tests run it with
# HOME=$VENV/home, where this script puts tests/sanity/pip_bootstrap.py in that script's cache slot
# (ensurepip, then the pinned pip from PyPI); the per-test venvs are then cached there too.
#
# Idempotent and cached per machine under $PROXSHIFT_SANITY_VENV (default
# /var/cache/proxshift/ansible-sanity-VERSION). Prints the venv path on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=$(sed -n 's/^ansible-core==//p' requirements-dev.txt)
VENV=${PROXSHIFT_SANITY_VENV:-/var/cache/proxshift/ansible-sanity-$VERSION}
stamp="$VENV/.stamp-ansible-core-$VERSION"
if [ ! -e "$stamp" ]; then
    python=${PROXSHIFT_VENV:-.venv}/bin/python
    [ -x "$python" ] || python=python3
    mkdir -p "$(dirname "$VENV")"
    rm -rf "$VENV"
    "$python" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "ansible-core==$VERSION" >&2
    reqs=$("$VENV/bin/python" -c 'import ansible_test, pathlib; print(pathlib.Path(ansible_test.__file__).parent / "_data/requirements")')
    args=()
    for f in "$reqs"/sanity.*.txt; do args+=(-r "$f"); done
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "${args[@]}" >&2
    touch "$stamp"
fi
pip_version=$("$VENV/bin/python" -c 'import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="3.11"))["pip"])')
mkdir -p "$VENV/home/.ansible/test/cache"
install -m 0644 tests/sanity/pip_bootstrap.py "$VENV/home/.ansible/test/cache/get_pip_${pip_version//./_}.py"
echo "$VENV"
