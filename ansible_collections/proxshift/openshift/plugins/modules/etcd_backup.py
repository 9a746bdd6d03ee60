#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/etcd_backup.py runs. The options must match the Rust argument spec of modules/etcd_backup; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: etcd_backup
short_description: Back up an OpenShift cluster's etcd to an S3-compatible object store
description:
  - Takes an etcd backup the way OpenShift documents it ("Backing up etcd data") - C(/usr/local/bin/cluster-backup.sh)
    run as root in a control-plane node's own root - and stores its two files, the etcd snapshot
    (C(snapshot_<date>.db)) and the static pod resources (C(static_kuberesources_<date>.tar.gz)), off the cluster
    in a bucket of an S3-compatible object store (Ceph RADOS Gateway, MinIO, AWS S3, ...). A restore needs both.
  - The backup runs in a Pod shaped as C(oc debug node/<node>) shapes its node debug Pod (the node by name, the host's
    C(/) at C(/host), privileged, host network and PID), in O(namespace), with the image of the node's own etcd
    container (on the node already; no pull, so a disconnected cluster works too) unless O(image) is given.
  - The Pod uploads each file itself, with C(curl) of the node, to a presigned URL valid only for O(timeout) plus two
    minutes; the store's keys never enter the cluster (the URLs are in a Secret deleted when the Pod ends).
  - The node computes each file's size and SHA-256; the module then finds each object in the store with that size
    and, with O(verify), reads it back and compares its SHA-256. The result (RV(backup)) is what the cluster's record
    keeps - location, object keys, sizes and checksums.
  - Runs on O(node) when it is a Ready control-plane node, else on the first Ready control-plane node by name;
    refused when none is Ready. A backup name already in the store is refused.
  - A failed backup Pod is kept for its log (the message names it); a Pod that outlives O(timeout) is deleted. The
    node's backup folder is removed after the upload unless O(keep_on_node).
  - With O(keep), the recorded O(backups) beyond the O(keep) newest (counting the new one) are deleted from the
    store. Only backups whose objects all lie under O(object_prefix) count and are deleted; one recorded in another
    store or prefix is never touched.
  - O(state=absent) deletes the objects of the recorded backup O(name) that lie under O(object_prefix). It talks to
    the store only and needs no O(kubeconfig) or O(api_url) (one of which V(present) requires), so the backups of
    a cluster that is gone can still be removed.
  - Check mode reads the store, the Nodes and the etcd Pod, and says where the backup would run and what
    retention would remove; it creates and deletes nothing.
version_added: 1.3.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.openshift.cluster
options:
  state:
    description:
      - V(present) takes a backup named O(name); V(absent) deletes the objects of the recorded backup O(name).
    type: str
    choices: [present, absent]
    default: present
  name:
    description:
      - The backup's name - 1 to 63 letters, digits, C(-), C(_) or C(.) - used for its folder on the node and its
        objects, C(<object_prefix>/<name>/snapshot.db) and C(<object_prefix>/<name>/static_kuberesources.tar.gz).
    type: str
    required: true
  node:
    description: The control-plane node to take the backup on; default the first Ready one by name.
    type: str
  namespace:
    description: The namespace of the backup Pod and its Secret; it must allow privileged Pods.
    type: str
    default: openshift-etcd
  image:
    description: The backup Pod's image; default the image of the node's C(etcd) container (C(openshift-etcd/etcd-<node>)).
    type: str
  backup_dir:
    description: The folder on the node that holds the backup's folder while it is taken.
    type: str
    default: /var/lib/proxshift/etcd-backup
  keep_on_node:
    description: Keep the backup's folder on the node after the upload (it is removed by default).
    type: bool
    default: false
  timeout:
    description: Seconds the backup Pod may run (its C(activeDeadlineSeconds)); the upload URLs last two minutes longer.
    type: int
    default: 900
  poll_interval:
    description: Seconds between looks at the backup Pod.
    type: int
    default: 5
  verify:
    description: Read each object back from the store and compare its SHA-256 with the node's (else only its size is checked).
    type: bool
    default: true
  keep:
    description: How many backups to keep, counting the new one; the older recorded O(backups) are deleted. V(0) keeps all.
    type: int
    default: 0
  backups:
    description:
      - The backups recorded so far, oldest first, as RV(backup) returned them (C(name) and C(files[].object) are read).
        O(keep) and O(state=absent) act on these.
    type: list
    elements: dict
    default: []
  bucket:
    description: The bucket the backups go to. It must exist.
    type: str
    required: true
  object_prefix:
    description: The key prefix of the backups (for example C(proxshift/etcd/<cluster>)).
    type: str
    default: proxshift/etcd
  endpoint_url:
    description:
      - The object store's URL, for example C(https://rgw.lab.example.com:7480). Requests are path-style
        (C(<endpoint_url>/<bucket>/<key>)).
      - Falls back to the E(AWS_ENDPOINT_URL_S3), then E(AWS_ENDPOINT_URL) environment variables.
    type: str
    required: true
    aliases: [s3_url]
  region:
    description:
      - The region requests are signed for (Signature Version 4).
      - Falls back to the E(AWS_REGION), then E(AWS_DEFAULT_REGION) environment variables.
    type: str
    default: us-east-1
  access_key:
    description:
      - The access key.
      - Falls back to the E(AWS_ACCESS_KEY_ID) environment variable (the AWX Amazon Web Services credential sets it).
    type: str
    required: true
    aliases: [aws_access_key_id, aws_access_key]
  secret_key:
    description:
      - The secret key.
      - Falls back to the E(AWS_SECRET_ACCESS_KEY) environment variable.
    type: str
    required: true
    aliases: [aws_secret_access_key, aws_secret_key]
  session_token:
    description:
      - The session token of temporary credentials.
      - Falls back to the E(AWS_SESSION_TOKEN), then E(AWS_SECURITY_TOKEN) environment variables.
    type: str
    aliases: [aws_session_token]
  endpoint_ca_path:
    description:
      - PEM file with the CA certificate(s) to trust for the object store, in addition to the system's.
      - Falls back to the E(AWS_CA_BUNDLE) environment variable.
    type: path
    aliases: [aws_ca_bundle]
  endpoint_validate_certs:
    description: Whether to check the object store's certificate.
    type: bool
    default: true
notes:
  - The node uploads with its own C(curl), so it must reach O(endpoint_url) and trust its certificate (the cluster's
    trusted CA bundle); the controller must reach it too, to check the objects.
  - The restore is OpenShift's documented procedure ("Restoring to a previous cluster state") - copy both files into
    one folder on the recovery control-plane host and run C(cluster-restore.sh) there. The objects are plain files.
seealso:
  - name: Backing up etcd data
    description: The OpenShift documentation of C(cluster-backup.sh).
    link: https://docs.openshift.com/container-platform/latest/backup_and_restore/control_plane_backup_and_restore/backing-up-etcd.html
"""

EXAMPLES = r"""
- name: Back up etcd before an upgrade, keeping the five newest backups
  proxshift.openshift.etcd_backup:
    kubeconfig: "{{ cluster_record.kubeconfig }}"
    name: "pre-upgrade-{{ now(utc=true, fmt='%Y%m%d-%H%M%S') }}"
    endpoint_url: https://rgw.lab.example.com:7480
    bucket: openshift-backups
    object_prefix: proxshift/etcd/lab
    endpoint_ca_path: /etc/pki/lab-ca.pem
    keep: 5
    backups: "{{ cluster_record.etcd_backups | default([]) }}"
  register: backup

- name: Delete one recorded backup from the store (no cluster needed)
  proxshift.openshift.etcd_backup:
    state: absent
    name: etcd-20261201-020000
    bucket: openshift-backups
    object_prefix: proxshift/etcd/lab
    backups: "{{ cluster_record.etcd_backups | default([]) }}"
"""

RETURN = r"""
backup:
  description:
    - O(state=present) - the backup - C(name), C(node), C(taken) (UTC), C(location) (C(s3://bucket/prefix/name/)),
      C(endpoint_url), C(bucket) and C(files), each with C(role) (C(snapshot) or C(static_resources)), C(name) (as
      C(cluster-backup.sh) named it), C(object) (its key), C(size) and C(sha256). In check mode C(files) is empty.
  returned: state is present
  type: dict
  sample:
    name: pre-upgrade-20261207-101500
    node: master-0.lab.example.com
    location: s3://openshift-backups/proxshift/etcd/lab/pre-upgrade-20261207-101500/
    files:
      - {role: snapshot, name: snapshot_2026-12-07_101502.db, object: proxshift/etcd/lab/pre-upgrade-20261207-101500/snapshot.db,
         size: 104857600, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
node:
  description: O(state=present) - the node the backup is (in check mode, would be) taken on.
  returned: state is present
  type: str
pruned:
  description: O(state=present) - the names of the recorded backups retention deleted (would delete, in check mode).
  returned: state is present
  type: list
  elements: str
removed:
  description: O(state=absent) - the object keys deleted (would be, in check mode).
  returned: state is absent
  type: list
  elements: str
"""
