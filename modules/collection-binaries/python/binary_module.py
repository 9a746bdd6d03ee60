# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action every ProxShift module runs through: Ansible's normal module run, with the collection's
binary built for the target's platform.

The modules of a collection are one multi-call binary per platform, `builds/linux-<machine>/proxshift_<collection>`;
`plugins/modules/NAME.py` are documentation stubs (what ansible-doc reads and lists). The binary picks the module
from `_ansible_module_name` in the args file Ansible writes. Three things Ansible's own module run does not do:
- Find the binary: Ansible's loader finds the stub. The action asks the target (through its connection, so a
  delegated task asks the delegate) for `uname -sm` and sends the matching build as a binary module, so the
  target needs no Python (no interpreter discovery, no AnsiballZ wrapper).
- Say what to do when the binaries are missing: they are build output, absent from a git checkout (and so
  from an AWX project sync) until `make build` puts them in; the task then fails with the one command that
  works.
- The inventory and lookup plugins run the controller's build with a backend flag (`--inventory`,
  `--lookup`); run_backend() does that, and backend_options() what they send.

One source, modules/collection-binaries/python/binary_module.py: each collection's
plugins/plugin_utils/binary_module.py is a symbolic link to it, and `ansible-galaxy collection build` stores
a link that leaves the collection as the file itself, so every tarball carries its own copy and installs and
runs alone from Galaxy (tests/integration/galaxy/test_awx_layout.py and test_packaging.py check both). This
module finds its collection from the path it was imported by, never the link's target.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess

from ansible.executor.module_common import modify_module
from ansible.plugins.action.normal import ActionModule as NormalAction
from ansible.utils.display import Display

display = Display()

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The folder of each supported Linux machine type's build (as `uname -m` and Python's platform.machine()
# spell it), under the collection root's builds/.
PLATFORM_DIRS = {
    "x86_64": "linux-x86_64",
    "amd64": "linux-x86_64",
    "aarch64": "linux-aarch64",
    "arm64": "linux-aarch64",
}
SUPPORTED = "Linux on x86_64 or aarch64"


class UnsupportedPlatform(Exception):
    """The target (or controller) is a platform the collection has no build for."""


def binary_path(collection_root: str, system: str, machine: str) -> str:
    """The collection's binary for a `system`/`machine` (as `uname -s`/`uname -m` print them)."""
    if system != "Linux" or machine not in PLATFORM_DIRS:
        raise UnsupportedPlatform(
            f"the modules are a native binary built for {SUPPORTED}; this host reports {system} {machine}"
        )
    name = "proxshift_" + os.path.basename(collection_root)
    return os.path.join(collection_root, "builds", PLATFORM_DIRS[machine], name)


def backend_options(plugin, names, templar) -> dict:
    """The options of `plugin` (a lookup or inventory plugin) to send to its binary, final: as Ansible's config
    system resolved them from the plugin's DOCUMENTATION (task or source, variables, environment, ansible.cfg,
    default), templated. The binary reads no environment variable of its own for a plugin call
    (ansible_module::run_plugin), so the documentation is each option's one list of names.

    One rule the modules keep is applied here too: an empty environment variable counts as unset (AWX renders a
    credential field left empty as ""), so the next variable the option documents is taken, and with none set
    the option is left to its default."""
    options = {}
    for name in names:
        value = plugin.get_option(name)
        try:
            seen, origin = plugin.get_option_and_origin(name)
        except KeyError:  # a required option given only in the task or the source (ansible-core < 2.18, below)
            seen, origin = None, "direct"
        if seen != value:
            # ansible-core < 2.18 works the origin out again from the config alone, without what the task or the
            # inventory source set (set_options' direct and var_options): a value it does not see came from there.
            origin = "direct"
        if _empty_env(origin):
            value = _first_set_env(plugin, name)
        # Options set as variables (proxshift_vault_url: "{{ ... }}") arrive untemplated.
        if isinstance(value, str) and templar.is_template(value):
            value = templar.template(value)
        if value is not None:
            options[name] = value
    return options


def _empty_env(origin) -> bool:
    """Whether an option's value came from an empty environment variable (origin `env: NAME`): its converted
    value need not be "" (a `type: path` option makes "" the working directory)."""
    text = str(origin)
    return text.startswith("env:") and os.environ.get(text[len("env:"):].strip()) == ""


def _first_set_env(plugin, name):
    """The first non-empty environment variable among those `plugin`'s option `name` documents, converted to the
    option's type; None when every one is unset or empty."""
    from ansible import constants as C
    from ansible.config.manager import ensure_type

    definition = C.config.get_configuration_definitions(_plugin_type(plugin), plugin._load_name).get(name, {})
    for entry in definition.get("env") or []:
        value = os.environ.get(entry["name"])
        if value:
            return ensure_type(value, definition.get("type"))
    return None


def _plugin_type(plugin) -> str:
    """`lookup` or `inventory`, as the config system files plugin definitions (LookupModule -> lookup)."""
    return getattr(plugin, "plugin_type", None) or type(plugin).__name__.lower().replace("module", "")


def run_backend(flag: str, options: dict, name: str, error=Exception) -> dict:
    """Run the controller's build with the backend `flag` and `options` as JSON on stdin (the inventory and
    lookup plugins' one way into Rust); its masked result, or `error` naming the plugin `name`."""
    try:
        binary = binary_path(COLLECTION_ROOT, platform.system(), platform.machine())
    except UnsupportedPlatform as err:
        raise error(f"{name}: {err}")
    if not os.access(binary, os.X_OK):
        raise error(missing_binary_message(name, binary))
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


def checkout_root(collection_root: str) -> str | None:
    """The ProxShift checkout this copy of the collection sits in (`make build` works there), if any."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(collection_root)))
    if os.path.isfile(os.path.join(root, "scripts", "build.sh")) and os.path.isfile(os.path.join(root, "Makefile")):
        return root
    return None


def collection_version(collection_root: str) -> str:
    """This copy's version: an installed copy's MANIFEST.json, else a checkout's galaxy.yml."""
    try:
        with open(os.path.join(collection_root, "MANIFEST.json")) as f:
            return json.load(f)["collection_info"]["version"]
    except (OSError, ValueError, KeyError):
        pass
    try:
        with open(os.path.join(collection_root, "galaxy.yml")) as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("version:"))
    except (OSError, StopIteration):
        return "<version>"


def missing_binary_message(action: str, binary: str, collection_root: str = COLLECTION_ROOT) -> str:
    """Why `action` cannot run: the build at `binary` is absent, and the one command that fixes it here."""
    checkout = checkout_root(collection_root)
    name = os.path.basename(collection_root)
    tarball = f"proxshift-{name}-{collection_version(collection_root)}.tar.gz"
    if checkout:
        return (
            f"{action}: the module binary {binary} is missing: this ProxShift checkout was not built. Run "
            f"`make build` in {checkout} (it builds the binaries and puts the checkout first on the collections "
            "path through build/collections). Without a Rust toolchain (an AWX project sync) the built "
            f"collections must come first instead: `ansible-galaxy collection install --force {tarball}` (and the "
            "other proxshift tarballs `make collections` writes) into the execution environment; --force because "
            "this checkout counts as installed, so a plain install does nothing (see awx/README.md)."
        )
    path = os.path.dirname(os.path.dirname(os.path.dirname(collection_root)))
    return (
        f"{action}: the module binary {binary} is missing: this copy of proxshift.{name} holds no build. "
        f"Install the built collection over it: `ansible-galaxy collection install --force -p {path} {tarball}` "
        "(the tarball `make collections` writes, or Galaxy's; --force because this copy counts as installed)."
    )


class BinaryModuleAction(NormalAction):
    """`ansible.builtin.normal` running the target platform's build, failing clearly when there is none."""

    _platform_binary = None  # set by run(): the build the target needs

    def run(self, tmp=None, task_vars=None):
        try:
            system, machine = self._target_platform()
            binary = binary_path(COLLECTION_ROOT, system, machine)
        except UnsupportedPlatform as err:
            return {"failed": True, "msg": f"{self._task.action}: {err}"}
        if not os.access(binary, os.X_OK):
            msg = missing_binary_message(self._task.action, binary)
            # Shown even when the task is no_log (the record and secrets tasks are): it names no secret.
            display.error(msg, wrap_text=False)
            return {"failed": True, "msg": msg}
        self._platform_binary = binary
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
        if self._platform_binary is None or module_name != self._task.action:
            return super()._configure_module(module_name, module_args, task_vars)  # e.g. async_wrapper
        # The binary in place of the documentation stub the loader found, as a binary module.
        built = modify_module(module_name=module_name, module_path=self._platform_binary,
                              module_args=module_args, templar=self._templar, task_vars=task_vars)
        if isinstance(built, tuple):  # ansible-core <= 2.18: (data, style, shebang) -> (style, shebang, data, path)
            return built[1], built[2], built[0], self._platform_binary
        return built, self._platform_binary  # ansible-core >= 2.19: (_BuiltModule, path)
