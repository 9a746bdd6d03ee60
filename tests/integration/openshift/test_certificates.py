"""Certificate keeping (proxshift.openshift.cluster_config state backup/restore/report, the
proxshift.openshift.certificates role and playbooks/tasks/certificates_backup.yml) against the real
kube-apiserver with OpenShift's IngressController and APIServer CRDs (tests/fixtures/crds) and a real OpenBao
holding the cluster's record. The certificates are made here, at test time (python `cryptography`, which
ansible-core depends on); no key is committed.

A rebuild is played cheaply: the Secrets and their wiring are deleted, as a reinstalled cluster lacks them,
and the next post phase puts the same certificate (same serial) back from the record.

The API really switches: once the APIServer names the kept `api` certificate, `FakeKubeApiserverOperator`
(tests/standins/kas.py) writes it into the files the real kube-apiserver serves its named certificate from, and
the apiserver serves it (an SSL handshake sees it) to the clients that ask for the API's name. OpenBao's real
TokenReview through that API then works with the Kubernetes auth config the external_secrets role writes from the
updated kubeconfig, and fails with the config it had before."""
from __future__ import annotations

import base64
import datetime
import json
import socket
import ssl
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from kube_fixtures import KubeApi, kube_api  # noqa: F401 (fixtures)
from kube_fixtures import wait_until
from standins.kas import FakeKubeApiserverOperator
from services import running_openbao
from testlib import REPO

CLUSTER = "lab"
DOMAIN = "example.com"
APPS_HOST = f"*.apps.{CLUSTER}.{DOMAIN}"
API_HOST = f"api.{CLUSTER}.{DOMAIN}"
# The API's host name as the test's clients use it (it resolves to the test kube-apiserver's 127.0.0.1).
API_NAME = "localhost"
RECORD = f"proxshift/clusters/{CLUSTER}"
INGRESS_PATH = "/apis/operator.openshift.io/v1/namespaces/openshift-ingress-operator/ingresscontrollers/default"
APISERVER_PATH = "/apis/config.openshift.io/v1/apiservers/cluster"
KEPT = [{"name": "apps-cert", "type": "ingress"}, {"name": "api-cert", "type": "api"}]
# The restore task itself is no_log (its arguments hold the keys); its summary shows the masked parts.
RESTORE = "proxshift.openshift.certificates : Restore of the kept certificates, Secret values masked"


def make_cert(names: list[str], serial: int, *, pkcs8: bool = False, key=None) -> tuple[str, str]:
    """A self-signed RSA certificate for `names` (SANs) valid for a year: (cert PEM, key PEM)."""
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(serial).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .sign(key, hashes.SHA256()))
    fmt = serialization.PrivateFormat.PKCS8 if pkcs8 else serialization.PrivateFormat.TraditionalOpenSSL
    key_pem = key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(namespace: str, name: str, crt: str, key: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace}, "data": {"tls.crt": b64(crt), "tls.key": b64(key)}}


def serial_of(api: KubeApi, namespace: str, name: str) -> int:
    s = api.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    pem = base64.b64decode(s["data"]["tls.crt"])
    return x509.load_pem_x509_certificate(pem).serial_number


def delete(api: KubeApi, path: str) -> None:
    status, out = api.request("DELETE", path)
    assert status in (200, 202, 404), out


def writes(api: KubeApi, since: int) -> list[str]:
    """Writes (no dry run) to Secrets, IngressControllers and APIServers after the first `since` audit events."""
    time.sleep(0.5)  # the audit log is written after the answer
    return [f"{e['verb']} {e['requestURI']}" for e in api.audit_events()[since:]
            if e["verb"] in ("create", "update", "patch", "delete") and "dryRun=All" not in e["requestURI"]
            and any(k in e["requestURI"] for k in ("/secrets", "/ingresscontrollers", "/apiservers"))]


@pytest.fixture(scope="module")
def bao(tmp_path_factory):
    with running_openbao(tmp_path_factory.mktemp("bao")) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(kube_api: KubeApi):
    """The namespaces OpenShift reads the certificates from (a real cluster has them)."""
    for ns in ("openshift-ingress", "openshift-config", "openshift-ingress-operator"):
        status, out = kube_api.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        assert status in (201, 409), out
    return kube_api


@pytest.fixture(scope="module")
def pairs():
    # The API's certificate also names `localhost`: the name this test's clients reach the API by (as they reach
    # api.<cluster>.<domain> on a cluster), so the kube-apiserver serves it to them by SNI.
    return {"apps": make_cert([APPS_HOST], 0xA11CE), "api": make_cert([API_HOST, API_NAME], 0xA91, pkcs8=True)}


@pytest.fixture
def secret_canaries(canary, pairs):
    """The keys, as PEM and as the Secrets' base64, must never show in any output."""
    for crt, key in pairs.values():
        canary(b64(key), "a kept certificate's key (Secret data)")
        canary(key.splitlines()[5], "a kept certificate's key (PEM line)")


def post_phase(kubeconfig: str, *, force_reset: bool = False, vault_auth: bool = False) -> str:
    """What site.yaml runs for kept_certificates after reading the record: the post phase's
    tasks/certificates.yml (backup into the record, restore), or force_reset.yml's backup alone. `vault_auth`:
    then, as the external_secrets phase after it, Vault's Kubernetes auth of the cluster from that kubeconfig
    (the role's entry point vault_auth: the same tasks as its main one)."""
    part = "certificates_backup.yml" if force_reset else "certificates.yml"
    eso = [{"name": "Vault's Kubernetes auth", "ansible.builtin.import_role":
            {"name": "proxshift.openshift.external_secrets", "tasks_from": "vault_auth"},
            "vars": {"external_secrets_cluster": CLUSTER, "external_secrets_kubeconfig": kubeconfig,
                     "external_secrets_namespace": ESO_NS, "external_secrets_service_account": ESO_SA}}]
    return json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"cluster_name": CLUSTER, "vault_credentials_path": "proxshift/clusters",
                 "cluster_vars": {"base_domain": DOMAIN, "kept_certificates": KEPT}},
        "tasks": [
            {"name": "Read the record", "ansible.builtin.import_role":
                {"name": "proxshift.hashi_vault.record", "tasks_from": "read"}, "vars": {"record_path": RECORD}},
            {"name": "Keep the certificates", "ansible.builtin.import_tasks": str(REPO / "playbooks/tasks" / part),
             "vars": {"proxshift_certificates_kubeconfig": kubeconfig,
                      "proxshift_certificates_tolerate_unreachable": force_reset}},
            *(eso if vault_auth else []),
        ]}])


ESO_NS, ESO_SA = "external-secrets", "external-secrets-vault"
AUTH = f"auth/kubernetes/{CLUSTER}"


def served_serial(api: KubeApi, name: str | None) -> int:
    """The serial of the certificate the kube-apiserver presents in a TLS handshake asking for `name` by SNI
    (None: no SNI, as a client of https://127.0.0.1 sends)."""
    port = int(api.url.rsplit(":", 1)[1])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # what is served, not whether it is trusted
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=name) as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def vault_login(api: KubeApi, bao) -> tuple[int, dict]:
    """A login at the cluster's auth mount with a fresh token of the store's service account (TokenRequest, as
    External Secrets makes one): OpenBao reviews it at the API of its config (TokenReview), over TLS with its CA."""
    tr = api.ok("POST", f"/api/v1/namespaces/{ESO_NS}/serviceaccounts/{ESO_SA}/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}})
    return bao.api("POST", f"{AUTH}/login", {"role": "external-secrets", "jwt": tr["status"]["token"]}, token="")


def token_reviews(api: KubeApi, since: int) -> list[str]:
    """Who asked the API for a TokenReview after the first `since` audit events."""
    time.sleep(0.5)  # the audit log is written after the answer
    return [e["user"]["username"] for e in api.audit_events()[since:]
            if e["verb"] == "create" and e["requestURI"].startswith("/apis/authentication.k8s.io/v1/tokenreviews")]


def kubeconfig_cas(path) -> str:
    kc = yaml.safe_load(path.read_text())
    return base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"]).decode()


def test_backup_rebuild_restore_same_serial(run_playbook, cluster: KubeApi, bao, pairs, secret_canaries, tmp_path):
    (apps_crt, apps_key), (api_crt, api_key) = pairs["apps"], pairs["api"]
    # The work folder's admin kubeconfig (site.yaml passes cluster_install_dir/auth/kubeconfig, a path), naming the
    # API by its host name, as the installer's does.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(Path(cluster.admin_cert_kubeconfig).read_text().replace("127.0.0.1", API_NAME))
    installer_cas = kubeconfig_cas(kubeconfig)
    installer_serial = served_serial(cluster, API_NAME)
    # The store's service account, which the external_secrets role makes on the cluster: Vault reviews its tokens
    # with the token itself (system:auth-delegator).
    cluster.ok("POST", "/api/v1/namespaces", {"metadata": {"name": ESO_NS}})
    cluster.ok("POST", f"/api/v1/namespaces/{ESO_NS}/serviceaccounts", {"metadata": {"name": ESO_SA}})
    cluster.ok("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "metadata": {"name": f"{ESO_SA}-tokenreview"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
        "subjects": [{"kind": "ServiceAccount", "name": ESO_SA, "namespace": ESO_NS}]})
    cluster.ok("POST", "/api/v1/namespaces/openshift-ingress/secrets",
               secret("openshift-ingress", "apps-cert", apps_crt, apps_key))
    cluster.ok("POST", "/api/v1/namespaces/openshift-config/secrets",
               secret("openshift-config", "api-cert", api_crt, api_key))
    env = {"VAULT_ADDR": bao.addr, "VAULT_TOKEN": bao.token}

    # The first post phase: the copies go into the record, the certificates are wired in; then Vault's Kubernetes
    # auth from the kubeconfig, as the external_secrets phase after it.
    run = run_playbook(post_phase(str(kubeconfig), vault_auth=True), env=env)
    assert run.rc == 0, run.output
    record = bao.kv_get(RECORD)
    assert sorted(record["certificates"]) == ["openshift-config/api-cert", "openshift-ingress/apps-cert"]
    kept = record["certificates"]["openshift-ingress/apps-cert"]
    assert kept["data"]["tls.crt"] == b64(apps_crt)
    assert set(kept["metadata"]) == {"name", "namespace"}, "server-managed metadata is not kept"
    restored = run.task(RESTORE)["certificates_restore_summary"]
    assert restored["changed"] is True
    assert [(c["source"], c["key_matches"], c["problems"]) for c in restored["certificates"]] == [
        ("backup", True, []), ("backup", True, [])]
    assert restored["certificates"][0]["certificate"]["sans"] == [APPS_HOST]
    assert restored["certificates"][1]["certificate"]["serial"] == "0a:91"
    assert cluster.get(INGRESS_PATH)["spec"]["defaultCertificate"] == {"name": "apps-cert"}
    assert cluster.get(APISERVER_PATH)["spec"]["servingCerts"]["namedCertificates"] == [
        {"names": [API_HOST], "servingCertificate": {"name": "api-cert"}}]
    # The report line names serial and expiry, never a value.
    assert "openshift-config/api-cert (api, backup): serial 0a:91, expires" in run.output
    # The API now serves api-cert: the kubeconfig trusts its anchor (self-signed: itself) besides the installer's
    # CAs, in the work folder and in the record (what a later run, and the external_secrets phase, reads).
    assert kubeconfig_cas(kubeconfig) == installer_cas.strip() + "\n" + api_crt
    assert yaml.safe_load(bao.kv_get(RECORD)["kubeconfig"]) == yaml.safe_load(kubeconfig.read_text())
    assert "1 CA certificate(s) of the API's kept certificates added to the kubeconfig" in run.output
    config = bao.api("GET", f"{AUTH}/config")[1]["data"]
    assert (config["kubernetes_host"], config["kubernetes_ca_cert"].strip()) == (
        cluster.url.replace("127.0.0.1", API_NAME), kubeconfig_cas(kubeconfig).strip()), config

    # The config Vault had before the API's CA was added (the installer's CAs only), for a while, to see it fail.
    bao.api("POST", f"{AUTH}/config", {"kubernetes_host": config["kubernetes_host"], "kubernetes_ca_cert": installer_cas,
                                       "disable_local_ca_jwt": config["disable_local_ca_jwt"]})

    with FakeKubeApiserverOperator(cluster):
        # OpenShift rolls the named certificate out to the kube-apiserver: it serves api-cert to a client asking
        # for the API's name, and still its own certificate to one without SNI (127.0.0.1, as kube_fixtures asks).
        wait_until(lambda: served_serial(cluster, API_NAME) == 0xA91, 60,
                   lambda: f"the kube-apiserver still serves serial {served_serial(cluster, API_NAME):#x} to {API_NAME}")
        assert served_serial(cluster, None) == installer_serial
        # OpenBao's TokenReview through the switched API fails with the installer's CAs alone ...
        since = len(cluster.audit_events())
        status, refused = vault_login(cluster, bao)
        assert (status, refused) == (403, {"errors": ["permission denied"]})
        # OpenBao tells the client no more; its review never reached the API (the TLS handshake was refused).
        assert token_reviews(cluster, since) == []
        # ... and works with the config the role wrote from the kubeconfig the post phase gave the API's anchor.
        bao.api("POST", f"{AUTH}/config", {k: config[k] for k in ("kubernetes_host", "kubernetes_ca_cert", "disable_local_ca_jwt")})
        since = len(cluster.audit_events())
        status, login = vault_login(cluster, bao)
        assert status == 200 and login["auth"]["token_policies"] == ["default", f"external-secrets-{CLUSTER}"], login
        assert token_reviews(cluster, since) == [f"system:serviceaccount:{ESO_NS}:{ESO_SA}"]

        # Rerun, through the switched API: nothing to write, neither in the record, nor in the cluster, nor in Vault.
        since = len(cluster.audit_events())
        version = bao.api("GET", f"secret/metadata/{RECORD}")[1]["data"]["current_version"]
        run = run_playbook(post_phase(str(kubeconfig), vault_auth=True), env=env)
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [], run.changed_tasks()
        assert writes(cluster, since) == []
        assert bao.api("GET", f"secret/metadata/{RECORD}")[1]["data"]["current_version"] == version
        rebuild_and_restore(run_playbook, cluster, bao, env, kubeconfig, installer_serial)


def rebuild_and_restore(run_playbook, cluster: KubeApi, bao, env: dict, kubeconfig: Path, installer_serial: int):
    """test_backup_rebuild_restore_same_serial's rebuild: the API serves what the APIServer names (the stand-in runs)."""
    # The rebuild: the new cluster has neither the Secrets nor the wiring, and its API serves the installer's
    # certificate.
    for path in ("/api/v1/namespaces/openshift-ingress/secrets/apps-cert",
                 "/api/v1/namespaces/openshift-config/secrets/api-cert", INGRESS_PATH, APISERVER_PATH):
        delete(cluster, path)
    wait_until(lambda: served_serial(cluster, API_NAME) == installer_serial, 60, lambda: "the API still serves api-cert")

    # Check mode: the restore is shown (Secret values masked in the diff), nothing is written.
    since = len(cluster.audit_events())
    run = run_playbook(post_phase(str(kubeconfig)), env=env, check=True, diff=True)
    assert run.rc == 0, run.output
    r = run.task(RESTORE)["certificates_restore_summary"]
    assert r["changed"] is True
    assert [x["action"] for x in r["results"]] == ["created"] * 4
    assert "tls.key" in json.dumps(r["diff"])
    assert writes(cluster, since) == []
    assert cluster.get("/api/v1/namespaces/openshift-ingress/secrets/apps-cert") is None

    # The post phase after the rebuild: the same certificates (same serials) are back and wired in.
    run = run_playbook(post_phase(str(kubeconfig)), env=env)
    assert run.rc == 0, run.output
    assert serial_of(cluster, "openshift-ingress", "apps-cert") == 0xA11CE
    assert serial_of(cluster, "openshift-config", "api-cert") == 0xA91
    assert cluster.get(INGRESS_PATH)["spec"]["defaultCertificate"] == {"name": "apps-cert"}
    assert cluster.get(APISERVER_PATH)["spec"]["servingCerts"]["namedCertificates"][0]["names"] == [API_HOST]
    wait_until(lambda: served_serial(cluster, API_NAME) == 0xA91, 60, lambda: "the API does not serve api-cert again")


def test_force_install_backup_needs_a_copy_of_each(run_playbook, cluster: KubeApi, bao, pairs, secret_canaries):
    """force_reset.yml's backup of an old cluster that cannot be read: the record's copies count, and a kept
    Secret with no copy anywhere stops the rebuild before anything is deleted, named."""
    bao.kv_put(RECORD, {"phase": "installed", "certificates": {
        "openshift-ingress/apps-cert": secret("openshift-ingress", "apps-cert", *pairs["apps"])}})
    gone = json.loads(cluster.kubeconfig("unused"))
    gone["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens: the old cluster is gone
    play = post_phase(json.dumps(gone), force_reset=True)
    run = run_playbook(play, env={"VAULT_ADDR": bao.addr, "VAULT_TOKEN": bao.token})
    assert run.rc != 0
    assert "the record's copies are kept" in run.output
    failed = run.task("Certificates — every kept one has a copy in the record")
    assert "No copy of openshift-config/api-cert in the cluster's record" in failed["msg"], failed
    assert "openshift-ingress/apps-cert" not in failed["msg"]


def test_restore_refuses_bad_certificates_before_writing(run_module, cluster: KubeApi, pairs, secret_canaries):
    """A Secret that exists nowhere, a key that is not the certificate's and a certificate that does not
    cover its hostname: all named at once, nothing written."""
    apps_crt, apps_key = pairs["apps"]
    api_crt, _ = pairs["api"]
    _, other_key = make_cert(["elsewhere.example.com"], 7)
    backup = {
        "openshift-config/api-wrong-key": secret("openshift-config", "api-wrong-key", api_crt, other_key),
        "openshift-config/api-wrong-host": secret("openshift-config", "api-wrong-host", apps_crt, apps_key),
    }
    args = {
        "kubeconfig": cluster.admin_cert_kubeconfig, "state": "restore", "certificates_backup": backup,
        "certificates": [
            {"namespace": "openshift-config", "name": "api-nowhere", "type": "api", "hostname": API_HOST},
            {"namespace": "openshift-config", "name": "api-wrong-key", "type": "api", "hostname": "api2.lab.example.com"},
            {"namespace": "openshift-config", "name": "api-wrong-host", "type": "api", "hostname": API_HOST},
        ],
    }
    since = len(cluster.audit_events())
    out, rc, stdout = run_module("cluster_config", args)
    assert out["failed"] is True, out
    msg = out["msg"]
    assert msg.startswith("restore refused before anything was written: "), msg
    assert ("Secret openshift-config/api-nowhere does not exist in the cluster and certificates_backup has no "
            "copy of it") in msg
    assert "Secret openshift-config/api-wrong-key (backup copy): does not cover api2.lab.example.com" in msg
    assert "tls.key does not belong to the certificate (its public key differs)" in msg
    assert f"Secret openshift-config/api-wrong-host (backup copy): does not cover {API_HOST} (SANs: {APPS_HOST})" in msg
    assert [c["key_matches"] for c in out["certificates"]] == [None, False, True]
    assert writes(cluster, since) == []
    assert apps_key.splitlines()[5] not in stdout

    # The report says the same without refusing, and warns.
    out, rc, _ = run_module("cluster_config", {**args, "state": "report"})
    assert rc == 0 and out["changed"] is False, out
    assert any("api-wrong-host: does not cover" in w for w in out["warnings"]), out["warnings"]
