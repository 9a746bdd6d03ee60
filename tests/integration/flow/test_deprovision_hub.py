"""Deprovision detaches the cluster from the ACM hub in every form the import takes (#32): a kubeconfig file,
a hub this project built (`acm_hub_cluster`, its kubeconfig read from its record in Vault), host + token
variables, and AWX's K8S_AUTH_* environment; with none it says so. Real ansible-playbook, OpenBao, pvesim and
a kube-apiserver playing the hub (the ManagedCluster CRD served, no ACM controllers)."""
from __future__ import annotations

import pytest

from kube_fixtures import KubeApi, kube_api  # noqa: F401 (pytest fixture)
from test_force_install import MC, forget_on_hub

CLUSTER = "lab-sno"


def managed_cluster(hub: KubeApi) -> dict:
    forget_on_hub(hub, CLUSTER)
    return hub.ok("POST", MC, {"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                               "metadata": {"name": CLUSTER}, "spec": {"hubAcceptsClient": True}})


@pytest.mark.parametrize("form", ["kubeconfig", "acm_hub_cluster", "host_token", "k8s_auth_env"])
def test_deprovision_detaches_through_every_hub_form(run_flow, site, kube_api: KubeApi, tmp_path, form):  # noqa: F811
    managed_cluster(kube_api)
    kubeconfig = kube_api.kubeconfig(kube_api.admin_token)
    extra, env = {"acm_hub_kubeconfig": ""}, {}
    if form == "kubeconfig":
        (tmp_path / "hub.kubeconfig").write_text(kubeconfig)
        extra["acm_hub_kubeconfig"] = str(tmp_path / "hub.kubeconfig")
    elif form == "acm_hub_cluster":
        site.bao.kv_put("openshift/clusters/hub1", {"phase": "installed", "kubeconfig": kubeconfig})
        extra["acm_hub_cluster"] = "hub1"
    elif form == "host_token":
        extra.update(acm_hub_host=kube_api.url, acm_hub_api_key=kube_api.admin_token, acm_hub_ca_cert=kube_api.ca_cert)
    else:
        env = {"K8S_AUTH_HOST": kube_api.url, "K8S_AUTH_API_KEY": kube_api.admin_token,
               "K8S_AUTH_SSL_CA_CERT": kube_api.ca_cert}
    run = run_flow("deprovision.yaml", CLUSTER, extra=extra, env_more=env)
    assert run.rc == 0, run.output
    assert run.task("proxshift.openshift.acm : Import into or detach from the ACM hub")["changed"] is True, run.output
    assert kube_api.get(f"{MC}/{CLUSTER}") is None, "the ManagedCluster is still on the hub"
    assert kube_api.admin_token not in run.output


def test_deprovision_says_when_no_hub_is_configured(run_flow, site, kube_api: KubeApi):  # noqa: F811
    managed_cluster(kube_api)
    run = run_flow("deprovision.yaml", CLUSTER, extra={"acm_hub_kubeconfig": ""})
    assert run.rc == 0, run.output
    assert "No ACM hub configured" in run.output and f"{CLUSTER} is not detached" in run.output, run.output
    assert kube_api.get(f"{MC}/{CLUSTER}") is not None
    forget_on_hub(kube_api, CLUSTER)
