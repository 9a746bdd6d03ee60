#!/bin/sh
# The execution environment's package manager (options.package_manager_path in execution-environment.yml):
# dnf on full images (CentOS Stream, UBI), microdnf on the ee-minimal ones, which have no dnf. ansible-builder
# calls it as `install -y PACKAGES` and `clean all`, which both understand.
if command -v dnf >/dev/null 2>&1; then
  exec dnf "$@"
fi
if command -v microdnf >/dev/null 2>&1; then
  exec microdnf "$@"
fi
echo "proxshift-pkgmgr: neither dnf nor microdnf is on PATH in this base image" >&2
exit 127
