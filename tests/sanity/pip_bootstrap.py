"""Offline stand-in for the pip bootstrap script that `ansible-test sanity` downloads into every
sanity venv it creates (they are made `--without-pip`). The download host is not reachable from these
machines, so `scripts/deps/ansible-sanity.sh` puts this file where ansible-test caches that script
(`~/.ansible/test/cache/get_pip_<version>.py`, HOME being the sanity cache's own).

ansible-test runs it with the new venv's Python as `get_pip <pip options> pip==<version> --no-setuptools
--no-wheel`. Python's own `ensurepip` installs the pip it bundles (no network), and that pip then
installs the pinned pip ansible-test asked for from the package index, as the real script would.
"""
import subprocess
import sys

BOOTSTRAP_ONLY = {"--no-setuptools", "--no-wheel"}


def main() -> None:
    # In a child: ensurepip.bootstrap() points PIP_CONFIG_FILE at /dev/null for the rest of the process,
    # which would drop the machine's pip configuration (its index and CA settings) for the second step.
    subprocess.check_call([sys.executable, "-m", "ensurepip"])
    args = [a for a in sys.argv[1:] if a not in BOOTSTRAP_ONLY]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *args])


if __name__ == "__main__":
    main()
