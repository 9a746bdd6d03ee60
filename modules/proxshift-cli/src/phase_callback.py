# Written by `proxshift` next to each run and enabled for it only: after each task banner it prints the
# task's tags, which name its site phase even for roles that several phases import (preflight reuses the
# manifests and cluster_vms roles). `proxshift` reads these lines and does not show them.
import json

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "proxshift_phases"
    CALLBACK_NEEDS_ENABLED = True

    def _tags(self, task):
        self._display.display("##proxshift-tags " + json.dumps([str(t) for t in task.tags]))

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._tags(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._tags(task)
