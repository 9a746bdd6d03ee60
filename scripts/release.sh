#!/usr/bin/env bash
# Release one collection: `make release COLLECTION=proxmox VERSION=1.1.0` (or scripts/release.sh proxmox 1.1.0).
#
# 1. checks VERSION is a semantic version above the collection's current one and that changelog fragments
#    say what changed (tests/integration/galaxy/test_versioning.py requires one for every change);
# 2. sets galaxy.yml's version and points awx/execution-environment.yml and the collection's README at the new tarball;
# 3. turns the fragments into the release with antsibull-changelog (changelogs/changelog.yaml, CHANGELOG.rst;
#    the fragments are removed);
# 4. builds the tarball into build/ (the binaries must be built: `make release` runs `make build` first);
# 5. in a git checkout, commits those files and tags the commit proxshift.COLLECTION-VERSION; that commit is the
#    release test_versioning.py counts changes from. The fragments decide the smallest version allowed (step 1).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 COLLECTION VERSION   (COLLECTION: proxmox, hashi_vault or openshift; VERSION: X.Y.Z)" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
coll=$1 version=$2
root="ansible_collections/proxshift/$coll"
[[ -f "$root/galaxy.yml" ]] || { echo "release: no collection '$coll' (proxmox, hashi_vault or openshift)" >&2; exit 2; }
[[ "$version" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] ||
  { echo "release: VERSION '$version' is not a semantic version X.Y.Z" >&2; exit 2; }
current=$(sed -n 's/^version: *//p' "$root/galaxy.yml")
if [[ "$version" == "$current" || "$(printf '%s\n%s\n' "$current" "$version" | sort -V | tail -1)" != "$version" ]]; then
  echo "release: VERSION $version is not above proxshift.$coll's current $current" >&2; exit 2
fi
if ! compgen -G "$root/changelogs/fragments/*.y*ml" >/dev/null; then
  echo "release: $root/changelogs/fragments/ is empty: add a fragment saying what changed" >&2; exit 2
fi
# The fragments decide the smallest version that may carry them (semantic versioning, as antsibull-changelog's
# sections mean it): a breaking change or a removal needs a major bump (a minor one below 1.0.0), a new feature or
# a deprecation a minor one, anything else a patch.
need=$(python3 - "$root/changelogs/fragments" "$current" "$version" <<'PY'
import pathlib, sys, yaml
frags, current, wanted = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
major, minor, patch = (int(n) for n in current.split("."))
rank = {"breaking_changes": 2, "removed_features": 2, "major_changes": 1, "minor_changes": 1, "deprecated_features": 1}
level, why = 0, []
for f in sorted(frags.glob("*.y*ml")):
    for section in yaml.safe_load(f.read_text()) or {}:
        r = rank.get(section, 0)
        if r and r >= level:
            why = why if r == level else []
            level = r
            why.append(f"{f.name} ({section})")
if level == 2 and major == 0:
    level = 1
smallest = {2: (major + 1, 0, 0), 1: (major, minor + 1, 0), 0: (major, minor, patch + 1)}[level]
if tuple(int(n) for n in wanted.split(".")) < smallest:
    kind = {2: "a major", 1: "a minor", 0: "a patch"}[level]
    print(f"{kind} release, {'.'.join(map(str, smallest))} or above: {', '.join(why)}")
PY
)
if [[ -n "$need" ]]; then
  echo "release: VERSION $version is too small for the fragments, which need $need" >&2; exit 2
fi
command -v antsibull-changelog >/dev/null ||
  { echo "release: antsibull-changelog not found: run 'make venv' (requirements-dev.txt)" >&2; exit 1; }

sed -i "s/^version: .*/version: $version/" "$root/galaxy.yml"
sed -i "s|proxshift-$coll-$current.tar.gz|proxshift-$coll-$version.tar.gz|" awx/execution-environment.yml "$root/README.md"
(cd "$root" && antsibull-changelog release --version "$version")
mkdir -p build
ansible-galaxy collection build --force --output-path build "$root"
# In a git checkout the release is a commit of exactly its files and an annotated tag, proxshift.COLLECTION-VERSION
# (the name Galaxy shows), that test_versioning.py and the next release count changes from.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git add -A -- "$root/galaxy.yml" "$root/changelogs" "$root/CHANGELOG.rst" "$root/README.md" awx/execution-environment.yml
  git commit -q -m "Release proxshift.$coll $version" -- "$root/galaxy.yml" "$root/changelogs" "$root/CHANGELOG.rst" \
    "$root/README.md" awx/execution-environment.yml
  git tag -a "proxshift.$coll-$version" -m "proxshift.$coll $version"
  echo "proxshift.$coll $version released: committed and tagged proxshift.$coll-$version"
else
  echo "proxshift.$coll $version released: commit galaxy.yml, changelogs/, CHANGELOG.rst, README.md and awx/execution-environment.yml"
fi
