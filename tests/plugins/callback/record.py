# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only callback: append every task result as one JSON line to $PROXSHIFT_RECORD.

The tests assert on what modules really returned (after the controller's own processing), without
scraping the human-readable output. The other events AWX stores from its callback (each retry of an
`until` loop, each loop item, each async poll) go as JSON lines to $PROXSHIFT_RECORD_EVENTS, which the
leak scan reads.
"""
import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: record
type: aggregate
short_description: Record task results as JSON lines for the ProxShift tests
description: [Appends each task result to the file named by PROXSHIFT_RECORD.]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "record"
    CALLBACK_NEEDS_ENABLED = True

    def _write(self, status, result, env="PROXSHIFT_RECORD"):
        path = os.environ.get(env)
        if not path:
            return
        task = result._task
        entry = {
            "status": status,
            "host": result._host.get_name(),
            "task": task.get_name(),
            "action": task.action,
            "result": result._result,
        }
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, default=str) + "\n")

    def v2_runner_on_ok(self, result):
        self._write("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write("failed", result)

    def v2_runner_on_skipped(self, result):
        self._write("skipped", result)

    def v2_runner_on_unreachable(self, result):
        self._write("unreachable", result)

    # What AWX also stores (awx/main/callbacks: runner_retry, runner_item_on_*, runner_on_async_*).
    def v2_runner_retry(self, result):
        self._write("retry", result, "PROXSHIFT_RECORD_EVENTS")

    def v2_runner_item_on_ok(self, result):
        self._write("item_ok", result, "PROXSHIFT_RECORD_EVENTS")

    def v2_runner_item_on_failed(self, result):
        self._write("item_failed", result, "PROXSHIFT_RECORD_EVENTS")

    def v2_runner_item_on_skipped(self, result):
        self._write("item_skipped", result, "PROXSHIFT_RECORD_EVENTS")

    def v2_runner_on_async_poll(self, result):
        self._write("async_poll", result, "PROXSHIFT_RECORD_EVENTS")

    def v2_runner_on_async_ok(self, result):
        self._write("async_ok", result, "PROXSHIFT_RECORD_EVENTS")

    def v2_runner_on_async_failed(self, result):
        self._write("async_failed", result, "PROXSHIFT_RECORD_EVENTS")
