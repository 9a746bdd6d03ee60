#!/usr/bin/env python3
"""Extract the subset of the Proxmox VE API schema that pvesim implements.

Usage: extract.py <pve-api-schema.json> > pve-api-subset.json

The input is the plain-JSON conversion of proxmox/pve-docs api-viewer/apidata.js
(AGPL-3.0-or-later). The output keeps, for every implemented path and method, the
method object exactly as upstream has it (parameters, returns, permissions,
allowtoken, proxyto, protected) minus documentation prose, so validation is
driven by upstream data.
"""
import json
import sys

# (path, [methods]) implemented by pvesim. Keep in sync with src/handlers/mod.rs.
SUBSET = {
    "/version": ["GET"],
    "/access/ticket": ["POST"],
    "/access/users": ["GET", "POST"],
    "/access/users/{userid}": ["GET"],
    "/access/users/{userid}/token": ["GET"],
    "/access/users/{userid}/token/{tokenid}": ["GET", "POST", "PUT", "DELETE"],
    "/access/roles": ["GET", "POST"],
    "/access/roles/{roleid}": ["GET", "PUT", "DELETE"],
    "/access/acl": ["GET", "PUT"],
    "/access/permissions": ["GET"],
    "/cluster/nextid": ["GET"],
    "/cluster/resources": ["GET"],
    "/cluster/ha/resources": ["GET", "POST"],
    "/cluster/ha/resources/{sid}": ["GET", "PUT", "DELETE"],
    "/cluster/ha/rules": ["GET", "POST"],
    "/cluster/ha/rules/{rule}": ["GET", "PUT", "DELETE"],
    "/cluster/ha/groups": ["GET", "POST"],
    "/cluster/ha/groups/{group}": ["GET", "PUT", "DELETE"],
    "/cluster/ha/status/current": ["GET"],
    "/cluster/ha/status/manager_status": ["GET"],
    "/nodes": ["GET"],
    "/nodes/{node}/status": ["GET"],
    "/nodes/{node}/qemu": ["GET", "POST"],
    "/nodes/{node}/qemu/{vmid}": ["GET", "DELETE"],
    "/nodes/{node}/qemu/{vmid}/config": ["GET", "POST", "PUT"],
    "/nodes/{node}/qemu/{vmid}/pending": ["GET"],
    "/nodes/{node}/qemu/{vmid}/resize": ["PUT"],
    "/nodes/{node}/qemu/{vmid}/clone": ["POST"],
    "/nodes/{node}/qemu/{vmid}/template": ["POST"],
    "/nodes/{node}/qemu/{vmid}/status": ["GET"],
    "/nodes/{node}/qemu/{vmid}/status/current": ["GET"],
    "/nodes/{node}/qemu/{vmid}/status/start": ["POST"],
    "/nodes/{node}/qemu/{vmid}/status/stop": ["POST"],
    "/nodes/{node}/qemu/{vmid}/status/shutdown": ["POST"],
    "/nodes/{node}/qemu/{vmid}/status/reboot": ["POST"],
    "/nodes/{node}/qemu/{vmid}/status/reset": ["POST"],
    "/nodes/{node}/qemu/{vmid}/status/suspend": ["POST"],
    "/nodes/{node}/qemu/{vmid}/status/resume": ["POST"],
    "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces": ["GET"],
    "/nodes/{node}/qemu/{vmid}/agent/ping": ["POST"],
    "/nodes/{node}/qemu/{vmid}/feature": ["GET"],
    "/nodes/{node}/qemu/{vmid}/snapshot": ["GET", "POST"],
    "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}": ["GET", "DELETE"],
    "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config": ["GET", "PUT"],
    "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback": ["POST"],
    "/nodes/{node}/lxc": ["GET", "POST"],
    "/nodes/{node}/lxc/{vmid}/config": ["GET"],
    "/nodes/{node}/lxc/{vmid}/status/current": ["GET"],
    "/nodes/{node}/lxc/{vmid}/interfaces": ["GET"],
    "/nodes/{node}/lxc/{vmid}/snapshot": ["GET"],
    "/nodes/{node}/network": ["GET"],
    "/nodes/{node}/vzdump": ["POST"],
    "/nodes/{node}/tasks": ["GET"],
    "/nodes/{node}/tasks/{upid}": ["DELETE"],
    "/nodes/{node}/tasks/{upid}/status": ["GET"],
    "/nodes/{node}/tasks/{upid}/log": ["GET"],
    "/nodes/{node}/storage": ["GET"],
    "/nodes/{node}/storage/{storage}/content": ["GET"],
    "/nodes/{node}/storage/{storage}/content/{volume}": ["DELETE"],
    "/nodes/{node}/storage/{storage}/upload": ["POST"],
    "/pools": ["GET", "POST", "PUT"],
    "/pools/{poolid}": ["GET", "PUT", "DELETE"],
}


PROSE = ("description", "verbose_description", "format_description")


def strip_prose(value, keep_description=False):
    """Drop documentation prose (size); keep the description of indexed
    options, which is where upstream states the index range ("n is 0 to 30")."""
    if isinstance(value, dict):
        out = {}
        for key, val in value.items():
            if key in PROSE and not (keep_description and key == "description"):
                continue
            if key == "properties" and isinstance(val, dict):
                out[key] = {
                    name: strip_prose(prop, keep_description=name.endswith("[n]"))
                    for name, prop in val.items()
                }
            else:
                out[key] = strip_prose(val)
        return out
    if isinstance(value, list):
        return [strip_prose(v) for v in value]
    return value


def walk(node):
    yield node
    for child in node.get("children") or []:
        yield from walk(child)


def main():
    with open(sys.argv[1], encoding="utf-8") as fh:
        tree = json.load(fh)
    found = {}
    for top in tree:
        for node in walk(top):
            if node["path"] in SUBSET:
                found[node["path"]] = node
    out = []
    for path, methods in SUBSET.items():
        if path not in found:
            sys.exit(f"path {path} not in schema")
        info = found[path].get("info", {})
        entry = {"path": path, "methods": {}}
        for m in methods:
            if m not in info:
                sys.exit(f"method {m} {path} not in schema")
            entry["methods"][m] = strip_prose(info[m])
        out.append(entry)
    # One method per line keeps diffs reviewable and the file small.
    sys.stdout.write("[\n")
    for i, entry in enumerate(out):
        sep = "," if i + 1 < len(out) else ""
        sys.stdout.write(json.dumps(entry, sort_keys=True, separators=(",", ":")) + sep + "\n")
    sys.stdout.write("]")
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
