# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the etcd_backup module of the collection's binary (docs: plugins/modules/etcd_backup.py); fails clearly when it is not built."""
from __future__ import annotations

from ansible_collections.proxshift.openshift.plugins.plugin_utils.binary_module import BinaryModuleAction


class ActionModule(BinaryModuleAction):
    pass
