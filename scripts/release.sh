#!/usr/bin/env bash
# Release one collection: `make release COLLECTION=proxmox VERSION=1.1.0` (or scripts/release.sh proxmox 1.1.0).
#
# 1. checks VERSION is a semantic version above the collection's last release (changelogs/changelog.yaml) and that
#    changelog fragments say what changed (tests/integration/galaxy/test_versioning.py requires one for every change);
#    the fragments decide the smallest version allowed;
# 2. sets galaxy.yml's version and points awx/execution-environment.yml and the collection's README at the new tarball
#    (and, after step 3, awx/execution-environment-galaxy.yml at the release: scripts/ee_galaxy.py);
# 3. turns the fragments into the release with antsibull-changelog (changelogs/changelog.yaml, CHANGELOG.rst;
#    the fragments are removed);
# 4. builds the tarball into build/ (the binaries must be built: `make release` runs `make build` first);
# 5. in a git checkout, commits those files and tags the commit proxshift.COLLECTION-VERSION; that commit is the
#    release test_versioning.py counts changes from;
# 6. opens the next version: galaxy.yml (and the EE's tarball name) become VERSION's next patch with `-dev`
#    (2.1.0 -> 2.1.1-dev), committed in a git checkout, so a build between releases is never taken for the release.
#    A development version only says "after VERSION": the next release's number comes from its fragments (step 1).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 COLLECTION VERSION   (COLLECTION: proxmox, hashi_vault or openshift; VERSION: X.Y.Z)" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
coll=$1 version=$2
root="ansible_collections/proxshift/$coll"
[[ -f "$root/galaxy.yml" ]] || { echo "release: no collection '$coll' (proxmox, hashi_vault or openshift)" >&2; exit 2; }
[[ "$version" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] ||
  { echo "release: VERSION '$version' is not a semantic version X.Y.Z" >&2; exit 2; }
released=$(python3 - "$root/changelogs/changelog.yaml" <<'PY'
import sys, yaml
releases = (yaml.safe_load(open(sys.argv[1])) or {}).get("releases") or {}
key = lambda v: tuple(int(n) for n in v.split("-")[0].split("."))
print(max(releases, key=key) if releases else "0.0.0")
PY
)
if [[ "$version" == "$released" || "$(printf '%s\n%s\n' "$released" "$version" | sort -V | tail -1)" != "$version" ]]; then
  echo "release: VERSION $version is not above proxshift.$coll's last release $released" >&2; exit 2
fi
if ! compgen -G "$root/changelogs/fragments/*.y*ml" >/dev/null; then
  echo "release: $root/changelogs/fragments/ is empty: add a fragment saying what changed" >&2; exit 2
fi
# The fragments decide the smallest version that may carry them (semantic versioning, as antsibull-changelog's
# sections mean it): a breaking change or a removal needs a major bump (a minor one below 1.0.0), a new feature or
# a deprecation a minor one, anything else a patch.
need=$(python3 - "$root/changelogs/fragments" "$released" "$version" <<'PY'
import pathlib, sys, yaml
frags, released, wanted = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
major, minor, patch = (int(n) for n in released.split("."))
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

# A tarball name of this collection, released (X.Y.Z) or not (X.Y.Z-dev), wherever the EE or the README names one.
tarball_re="proxshift-$coll-[0-9]+\.[0-9]+\.[0-9]+(-dev)?\.tar\.gz"
set_version() {  # set_version VERSION FILE... : galaxy.yml's version and the tarball name in FILEs
  local v=$1; shift
  sed -i "s/^version: .*/version: $v/" "$root/galaxy.yml"
  sed -i -E "s/$tarball_re/proxshift-$coll-$v.tar.gz/g" "$@"
}
set_version "$version" awx/execution-environment.yml "$root/README.md"
(cd "$root" && antsibull-changelog release --version "$version")
python3 scripts/ee_galaxy.py  # the Galaxy EE variant pins the collections' last releases
mkdir -p build
ansible-galaxy collection build --force --output-path build "$root"
IFS=. read -r major minor patch <<<"$version"
next="$major.$minor.$((patch + 1))-dev"
# In a git checkout the release is a commit of exactly its files and an annotated tag, proxshift.COLLECTION-VERSION
# (the name Galaxy shows), that test_versioning.py and the next release count changes from; the next commit opens
# the development version (the README keeps the released tarball's name: it tells users what to install).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=("$root/galaxy.yml" "$root/changelogs" "$root/CHANGELOG.rst" "$root/README.md" awx/execution-environment.yml
    awx/execution-environment-galaxy.yml)
  git add -A -- "${files[@]}"
  git commit -q -m "Release proxshift.$coll $version" -- "${files[@]}"
  git tag -a "proxshift.$coll-$version" -m "proxshift.$coll $version"
  set_version "$next" awx/execution-environment.yml
  git commit -q -m "proxshift.$coll: open $next after the $version release" -- "$root/galaxy.yml" awx/execution-environment.yml
  echo "proxshift.$coll $version released: committed and tagged proxshift.$coll-$version; galaxy.yml is now $next"
else
  set_version "$next" awx/execution-environment.yml
  echo "proxshift.$coll $version released (build/proxshift-$coll-$version.tar.gz); galaxy.yml is now $next:" \
    "commit galaxy.yml, changelogs/, CHANGELOG.rst, README.md and awx/execution-environment*.yml"
fi
