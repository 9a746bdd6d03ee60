# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action every ProxShift module runs through: Ansible's normal module run, with the module binary
built for the target's platform.

Two things Ansible's own binary-module support does not do:
- The binaries are build output, absent from a git checkout (and so from an AWX project sync) until
  `make build` puts them in. Without a check a task naming such a module stops the whole playbook at
  parse time with "couldn't resolve module/action"; with it the task fails saying what to do.
- Ansible sends the one file it finds in plugins/modules/ (the x86_64 build) to every target. Each
  collection also carries an aarch64 build in builds/linux-aarch64/; the action asks the target (through
  its connection, so a delegated task asks the delegate) for `uname -sm` and sends the matching build.

The inventory and lookup plugins run their binary on the controller; they pick it with binary_path()
for the controller's own platform.

Each collection carries its own copy of this file so that it installs and runs alone from Galaxy;
tests/integration/galaxy/test_awx_layout.py keeps the copies identical.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess

from ansible.plugins.action.normal import ActionModule as NormalAction
from ansible.utils.display import Display

display = Display()

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Where each supported Linux machine type (as `uname -m` and Python's platform.machine() spell it) finds
# its builds, relative to the collection root. x86_64 builds are where Ansible's module loader looks.
PLATFORM_DIRS = {
    "x86_64": ("plugins", "modules"),
    "amd64": ("plugins", "modules"),
    "aarch64": ("builds", "linux-aarch64"),
    "arm64": ("builds", "linux-aarch64"),
}
SUPPORTED = "Linux on x86_64 or aarch64"


class UnsupportedPlatform(Exception):
    """The target (or controller) is a platform the collection has no build for."""


def binary_path(collection_root: str, name: str, system: str, machine: str) -> str:
    """The build of binary `name` for a `system`/`machine` (as `uname -s`/`uname -m` print them)."""
    if system != "Linux" or machine not in PLATFORM_DIRS:
        raise UnsupportedPlatform(
            f"{name} is a native binary built for {SUPPORTED}; this host reports {system} {machine}"
        )
    return os.path.join(collection_root, *PLATFORM_DIRS[machine], name)


def backend_options(plugin, names, templar) -> dict:
    """The options of `plugin` (a lookup or inventory plugin) to send to its binary: those given in the task
    or the plugin's config, as variables or in ansible.cfg, templated.

    An option that comes from an environment variable, or is only a default, is left out: the binary reads
    the same variables (the plugin's documented `env:` list is its spec's, a test compares) and applies the
    same defaults, with the modules' rule that an empty variable counts as unset (AWX renders a credential
    field left empty as ""). So modules and plugins read the environment one way, in one place."""
    options = {}
    for name in names:
        value, origin = plugin.get_option_and_origin(name)
        if value is None or origin == "default" or str(origin).startswith("env"):
            continue
        # Options set as variables (proxshift_vault_url: "{{ ... }}") arrive untemplated.
        if isinstance(value, str) and templar.is_template(value):
            value = templar.template(value)
        if value is not None:
            options[name] = value
    return options


def run_backend(backend: str, flag: str, options: dict, name: str, error=Exception) -> dict:
    """Run the controller's build of `backend` with `flag` and `options` as JSON on stdin (the inventory and
    lookup plugins' one way into Rust); its masked result, or `error` naming the plugin `name`."""
    try:
        binary = binary_path(COLLECTION_ROOT, backend, platform.system(), platform.machine())
    except UnsupportedPlatform as err:
        raise error(f"{name}: {err}")
    if not os.access(binary, os.X_OK):
        raise error(f"{name}: {binary} is missing or not executable (build the collection: make build)")
    proc = subprocess.run([binary, flag], input=json.dumps(options), capture_output=True, text=True, check=False)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise error(f"{name}: {os.path.basename(binary)} exited with {proc.returncode} and no result")
    if result.get("failed"):
        raise error(f"{name}: {result.get('msg', 'failed')}")
    for warning in result.get("warnings", []):
        display.warning(f"{name}: {warning}")
    return result


def missing_binary_message(action: str, binary: str) -> str:
    """Why `action` cannot run: its build at `binary` is absent, and the fixes."""
    return (
        f"{action}: the module binary {binary} is missing: this copy of the collection was not built. "
        "In a ProxShift checkout run `make build` (it builds the binaries and puts the checkout first on "
        "the collections path through build/collections). Under AWX/AAP or anywhere else, install the "
        "built collections (`make collections`, then `ansible-galaxy collection install "
        "proxshift-*.tar.gz`) into the execution environment or a collections path that comes before "
        "this copy (see awx/README.md)."
    )


class BinaryModuleAction(NormalAction):
    """`ansible.builtin.normal` running the target platform's build, failing clearly when there is none."""

    _platform_binary = None  # set by run() when the target needs another build than the loader found

    def run(self, tmp=None, task_vars=None):
        name = self._task.action.rsplit(".", 1)[-1]
        found = self._shared_loader_obj.module_loader.find_plugin_with_context(
            self._task.action, collection_list=self._task.collections
        )
        try:
            system, machine = self._target_platform()
            binary = binary_path(COLLECTION_ROOT, name, system, machine)
        except UnsupportedPlatform as err:
            return {"failed": True, "msg": f"{self._task.action}: {err}"}
        if not found.resolved or not os.access(binary, os.X_OK):
            msg = missing_binary_message(self._task.action, binary)
            # Shown even when the task is no_log (the record and secrets tasks are): it names no secret.
            display.error(msg, wrap_text=False)
            return {"failed": True, "msg": msg}
        if PLATFORM_DIRS[machine] != PLATFORM_DIRS["x86_64"]:
            self._platform_binary = (found.plugin_resolved_path, binary)
        return super().run(tmp, task_vars)

    def _target_platform(self):
        """(`uname -s`, `uname -m`) of the host the module will run on."""
        res = self._low_level_execute_command("uname -sm", sudoable=False)
        words = (res.get("stdout") or "").split()
        if res.get("rc") != 0 or len(words) != 2:
            detail = (res.get("stderr") or res.get("stdout") or "").strip()[:200]
            raise UnsupportedPlatform(
                f"the module is a native binary built for {SUPPORTED}, and the target did not answer "
                f"`uname -sm` (exit {res.get('rc')}: {detail or 'no output'})"
            )
        return words[0], words[1]

    def _configure_module(self, module_name, module_args, task_vars):
        built = super()._configure_module(module_name, module_args, task_vars)
        loader_path = os.path.realpath(built[-1])
        if self._platform_binary is None or loader_path != os.path.realpath(self._platform_binary[0]):
            return built  # the x86_64 build, or another module (async_wrapper)
        binary = self._platform_binary[1]
        with open(binary, "rb") as f:
            data = f.read()
        if len(built) == 4:  # ansible-core <= 2.18: (style, shebang, data, path)
            return built[0], built[1], data, binary
        # ansible-core >= 2.19: (_BuiltModule, path); 2.21 sends the data, 2.19 the file at path.
        return dataclasses.replace(built[0], b_module_data=data), binary
