#!/usr/bin/env bash
# A venv for `ansible-test sanity` on the built collections (tests/integration/galaxy): the project's
# ansible-core release plus the pinned requirements that release's ansible-test ships for its sanity
# tests (ansible_test/_data/requirements/sanity.*.txt: pylint, pycodestyle, yamllint, voluptuous,
# antsibull-changelog, ...), so the tests run with `--local` and need no container or network.
# Also holds antsibull-changelog, which renders the collections' CHANGELOG.rst from
# changelogs/changelog.yaml.
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
echo "$VENV"
