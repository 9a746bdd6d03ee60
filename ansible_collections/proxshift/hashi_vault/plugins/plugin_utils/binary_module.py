# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action every ProxShift module runs through: Ansible's normal module run, once the module's
binary is known to be there.

The binaries are build output, absent from a git checkout (and so from an AWX project sync) until
`make build` puts them in. Without this check a task naming such a module stops the whole playbook at
parse time with "couldn't resolve module/action"; with it the task fails saying what to do.

Each collection carries its own copy of this file so that it installs and runs alone from Galaxy;
tests/integration/galaxy/test_awx_layout.py keeps the copies identical.
"""
from __future__ import annotations

import os

from ansible.plugins.action.normal import ActionModule as NormalAction
from ansible.utils.display import Display

display = Display()

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def missing_binary_message(action: str, collection_root: str) -> str:
    """Why `action` cannot run from the copy of its collection at `collection_root`, and the fixes."""
    name = action.rsplit(".", 1)[-1]
    binary = os.path.join(collection_root, "plugins", "modules", name)
    return (
        f"{action}: the module binary {binary} is missing: this copy of the collection was not built. "
        "In a ProxShift checkout run `make build` (it builds the binaries and puts the checkout first on "
        "the collections path through build/collections). Under AWX/AAP or anywhere else, install the "
        "built collections (`make collections`, then `ansible-galaxy collection install "
        "proxshift-*.tar.gz`) into the execution environment or a collections path that comes before "
        "this copy (see awx/README.md)."
    )


class BinaryModuleAction(NormalAction):
    """`ansible.builtin.normal`, failing with a clear message when the module binary is not built."""

    def run(self, tmp=None, task_vars=None):
        found = self._shared_loader_obj.module_loader.find_plugin_with_context(
            self._task.action, collection_list=self._task.collections
        )
        if not found.resolved:
            msg = missing_binary_message(self._task.action, COLLECTION_ROOT)
            # Shown even when the task is no_log (the record and secrets tasks are): it names no secret.
            display.error(msg, wrap_text=False)
            return {"failed": True, "msg": msg}
        return super().run(tmp, task_vars)
