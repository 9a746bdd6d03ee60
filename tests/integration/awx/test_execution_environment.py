"""AWX / AAP packaging: the execution environment context builds offline with ansible-builder and
installs the three collection tarballs; the credential types inject exactly the modules' environment
fallbacks; the job templates point at real playbooks and ask for `cluster_name`."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml

from testlib import REPO, ansible_env, tool

AWX = REPO / "awx"
COLLECTIONS = ("proxmox", "hashi_vault", "openshift")
# Any network use during `ansible-builder create` fails fast through these.
OFFLINE = {
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "",
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    "PIP_NO_INDEX": "1",
}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def galaxy_version(coll: str) -> str:
    return load(REPO / "ansible_collections/proxshift" / coll / "galaxy.yml")["version"]


@pytest.fixture(scope="module")
def ee_context(tmp_path_factory):
    """Tarballs built into <tmp>/build, the EE file at <tmp>/awx/, and `ansible-builder create` run offline."""
    root = tmp_path_factory.mktemp("ee")
    build = root / "build"
    env = ansible_env(root, OFFLINE)
    for coll in COLLECTIONS:
        proc = subprocess.run(
            [tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(build),
             str(REPO / "ansible_collections/proxshift" / coll)],
            env=env, capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    (root / "awx").mkdir()
    shutil.copy(AWX / "execution-environment.yml", root / "awx" / "execution-environment.yml")
    shutil.copytree(AWX / "ee", root / "awx" / "ee")
    # No build/installers: local client tarballs, when any, are in awx/ee/installers/ (copied with awx/ee).
    context = root / "context"
    proc = subprocess.run(
        [tool("ansible-builder"), "create", "-f", str(root / "awx/execution-environment.yml"),
         "-c", str(context), "--output-filename", "Containerfile", "-v", "3"],
        env=env, capture_output=True, text=True, timeout=300, cwd=root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return context


def test_builder_version_is_pinned():
    pins = (REPO / "requirements-dev.txt").read_text()
    assert re.search(r"^ansible-builder==3\.2\.0$", pins, re.M)
    proc = subprocess.run([tool("ansible-builder"), "--version"], capture_output=True, text=True)
    assert proc.stdout.strip() == "3.2.0", proc.stdout + proc.stderr


def test_ee_file_names_the_tarballs_galaxy_builds():
    ee = load(AWX / "execution-environment.yml")
    assert ee["version"] == 3
    names = [c["name"] for c in ee["dependencies"]["galaxy"]["collections"]]
    assert names == [f"collections/proxshift-{c}-{galaxy_version(c)}.tar.gz" for c in COLLECTIONS]
    assert all(c["type"] == "file" for c in ee["dependencies"]["galaxy"]["collections"])
    # The controller inside the EE runs the same ansible-core the project tests with.
    core_pin = re.search(r"^ansible-core==(\S+)$", (REPO / "requirements-dev.txt").read_text(), re.M).group(1)
    assert ee["dependencies"]["ansible_core"]["package_pip"] == f"ansible-core=={core_pin}"


def test_context_installs_nmstate_and_the_openshift_clients_step(ee_context):
    bindep = (ee_context / "_build/bindep.txt").read_text()
    assert re.search(r"^nmstate \[platform:rpm\]$", bindep, re.M), bindep
    script = ee_context / "_build/scripts/install-openshift-clients.sh"
    assert script.read_bytes() == (AWX / "ee/install-openshift-clients.sh").read_bytes()
    assert (ee_context / "_build/installers").is_dir()
    final_stage = (ee_context / "Containerfile").read_text().split("FROM base AS final", 1)[1]
    # The system packages (nmstate) are installed in the final image, then the clients step runs.
    assert "bindep" in final_stage or "install-from-bindep" in final_stage, final_stage
    step = final_stage.index("COPY _build/scripts/install-openshift-clients.sh /usr/local/bin/")
    assert 'ARG OPENSHIFT_VERSIONS=""' in final_stage[:step]
    run = final_stage[step:]
    assert re.search(r'install-openshift-clients\.sh "\$v" /usr/local/share/proxshift/installers', run), run
    assert "ENV PROXSHIFT_INSTALLER_CACHE=/usr/local/share/proxshift/installers" in run


def test_every_stage_takes_ansible_builders_package_manager_argument(ee_context):
    """No wrapper script: ansible-builder's own PKGMGR (options.package_manager_path), dnf by default, which
    `--build-arg PKGMGR=/usr/bin/microdnf` changes in every stage for an ee-minimal base (awx/README.md)."""
    containerfile = (ee_context / "Containerfile").read_text()
    assert not (AWX / "ee/pkgmgr.sh").exists() and "proxshift-pkgmgr" not in containerfile
    head, *stages = re.split(r"^FROM ", containerfile, flags=re.M)
    assert 'ARG PKGMGR="/usr/bin/dnf"' in head, head
    assert [s.split()[0] for s in stages][0] == "$EE_BASE_IMAGE" and len(stages) >= 3, stages
    for stage in stages:
        uses = [m.start() for m in re.finditer(r"\$PKGMGR\b", stage)]
        declared = re.search(r"^ARG PKGMGR$", stage, re.M)
        assert declared and all(declared.start() < u for u in uses), stage
    assert "--build-arg PKGMGR=/usr/bin/microdnf" in (AWX / "README.md").read_text()


def test_the_context_has_the_installers_folder_without_any_local_tarball(ee_context):
    """The clients step copies _build/installers; it comes from awx/ee/installers/, whose README keeps it in git,
    so a context made without local tarballs (nothing but the collections) builds."""
    assert sorted(p.name for p in (ee_context / "_build/installers").iterdir() if not p.name.startswith(".")) == [
        "README.md"]
    assert "COPY _build/installers /tmp/proxshift-installers" in (ee_context / "Containerfile").read_text()
    ignored = (AWX / "ee/installers/.gitignore").read_text().split()
    assert ignored == ["*.tar.gz", "sha256sum.txt"], ignored


def test_context_installs_the_three_collections(ee_context):
    containerfile = (ee_context / "Containerfile").read_text()
    # A galaxy stage installs from the requirements file into the image-wide collections dir …
    galaxy_stage = containerfile.split("FROM base AS galaxy", 1)[1].split("\nFROM ", 1)[0]
    assert "COPY _build /build" in galaxy_stage
    assert re.search(
        r"ansible-galaxy collection install .*-r requirements\.yml --collections-path \"/usr/share/ansible/collections\"",
        galaxy_stage,
    ), galaxy_stage
    # … and the final image copies them in.
    final_stage = containerfile.split("FROM base AS final", 1)[1]
    assert "COPY --from=galaxy /usr/share/ansible /usr/share/ansible" in final_stage
    assert 'ARG PYCMD="/usr/bin/python3.12"' in containerfile
    assert "ansible-core==" in containerfile and "ansible-runner==" in containerfile

    reqs = load(ee_context / "_build/requirements.yml")
    assert [c["type"] for c in reqs["collections"]] == ["file"] * 3
    for coll, entry in zip(COLLECTIONS, reqs["collections"]):
        # The path in requirements.yml resolves from /build, where the context's _build is copied.
        tarball = ee_context / "_build" / entry["name"]
        assert tarball.is_file(), entry
        with tarfile.open(tarball) as tf:
            manifest = json.load(tf.extractfile("MANIFEST.json"))["collection_info"]
        assert (manifest["namespace"], manifest["name"], manifest["version"]) == ("proxshift", coll, galaxy_version(coll))


def last_release(coll: str) -> str:
    log = load(REPO / "ansible_collections/proxshift" / coll / "changelogs/changelog.yaml")
    return max(log["releases"], key=lambda v: tuple(int(n) for n in v.split(".")))


def test_the_galaxy_ee_is_the_ee_with_the_released_collections_by_name():
    """awx/execution-environment-galaxy.yml is what scripts/ee_galaxy.py makes of the EE file (nothing else differs):
    the collections by name at their last releases, no tarball from build/."""
    proc = subprocess.run([tool("python"), str(REPO / "scripts/ee_galaxy.py"), "--check"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    local, galaxy = load(AWX / "execution-environment.yml"), load(AWX / "execution-environment-galaxy.yml")
    assert galaxy["dependencies"]["galaxy"]["collections"] == [
        {"name": f"proxshift.{c}", "version": f"=={last_release(c)}"} for c in COLLECTIONS]
    assert [f["src"] for f in galaxy["additional_build_files"]] == [
        f["src"] for f in local["additional_build_files"] if not f["src"].startswith("../build/")]
    for key in ("images", "options", "additional_build_steps"):
        assert galaxy[key] == local[key], key


def test_the_galaxy_ee_context_builds_from_a_fresh_clone(tmp_path):
    """Nothing built, no build/ folder: `ansible-builder create` of the Galaxy variant makes a context whose
    requirements name the released collections for the image build to fetch."""
    shutil.copytree(AWX, tmp_path / "awx", ignore=shutil.ignore_patterns("*.tar.gz"))
    assert not (tmp_path / "build").exists()
    context = tmp_path / "context"
    proc = subprocess.run(
        [tool("ansible-builder"), "create", "-f", str(tmp_path / "awx/execution-environment-galaxy.yml"),
         "-c", str(context), "--output-filename", "Containerfile"],
        env=ansible_env(tmp_path, OFFLINE), capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reqs = load(context / "_build/requirements.yml")
    assert reqs["collections"] == [{"name": f"proxshift.{c}", "version": f"=={last_release(c)}"} for c in COLLECTIONS]
    assert not list(context.rglob("*.tar.gz"))
    assert "COPY _build/installers /tmp/proxshift-installers" in (context / "Containerfile").read_text()


# --- credential types ------------------------------------------------------------------------------

FIELD_TYPES = {"string", "boolean"}


def credential_types() -> list[tuple[str, dict]]:
    return [(p.name, load(p)) for p in sorted((AWX / "credential_types").glob("*.yml"))]


def module_env_fallbacks() -> dict[str, set[str]]:
    """Environment variables the module sources read as option fallbacks (`.env(&["X"])`), per crate."""
    found: dict[str, set[str]] = {}
    for src in (REPO / "modules").glob("*/src/**/*.rs"):
        crate = src.relative_to(REPO / "modules").parts[0]
        for group in re.findall(r"\.env\(&\[([^\]]*)\]\)", src.read_text()):
            found.setdefault(crate, set()).update(re.findall(r'"([A-Z0-9_]+)"', group))
    return found


def render(template: str, values: dict) -> str:
    return jinja2.Environment(undefined=jinja2.Undefined).from_string(template).render(**values)


def test_credential_types_are_well_formed():
    types = credential_types()
    assert {name for name, _ in types} >= {"proxmox_api_token.yml", "vault.yml"}
    for name, ct in types:
        assert ct["kind"] == "cloud", name
        fields = ct["inputs"]["fields"]
        ids = [f["id"] for f in fields]
        assert len(ids) == len(set(ids)), name
        for f in fields:
            assert f["type"] in FIELD_TYPES and f.get("label"), (name, f)
            assert not (f.get("secret") and f["type"] != "string"), (name, f)
        assert set(ct["inputs"].get("required", [])) <= set(ids), name
        # Every injector template may only use the inputs and AWX's `tower` namespace.
        injectors = ct["injectors"]
        templates = [*injectors.get("env", {}).values(), *injectors.get("file", {}).values(),
                     *injectors.get("extra_vars", {}).values()]
        for t in templates:
            used = jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(str(t)))
            assert used <= set(ids) | {"tower"}, (name, t, used)
        # Secrets are injected, never baked into descriptions or defaults.
        for f in fields:
            if f.get("secret"):
                assert "default" not in f, (name, f)


def test_proxmox_credential_injects_the_modules_env_fallbacks():
    ct = load(AWX / "credential_types/proxmox_api_token.yml")
    env = ct["injectors"]["env"]
    assert set(env) == {"PROXMOX_HOST", "PROXMOX_USER", "PROXMOX_TOKEN_ID", "PROXMOX_TOKEN_SECRET",
                        "PROXMOX_VALIDATE_CERTS", "PROXMOX_CA_PATH"}
    fallbacks = module_env_fallbacks()
    assert set(env) <= fallbacks.get("pve-client", set()), fallbacks.get("pve-client")
    secret = "canary-7d1c-token-secret"
    values = {"host": "pve1.example.com", "user": "proxshift@pve", "token_id": "ansible", "token_secret": secret,
              "skip_tls_verify": False, "tower": {"filename": {"ca": "/runner/env/tmpCA"}}}
    rendered = {k: render(v, values) for k, v in env.items()}
    assert rendered == {"PROXMOX_HOST": "pve1.example.com", "PROXMOX_USER": "proxshift@pve",
                        "PROXMOX_TOKEN_ID": "ansible", "PROXMOX_TOKEN_SECRET": secret,
                        "PROXMOX_VALIDATE_CERTS": "true", "PROXMOX_CA_PATH": ""}
    # The CA field, when given, is a file AWX writes; its path is the modules' ca_path.
    assert render(env["PROXMOX_CA_PATH"], {**values, "ca": "-----BEGIN CERTIFICATE-----"}) == "/runner/env/tmpCA"
    assert ct["injectors"]["file"] == {"template.ca": "{{ ca }}"}
    # An unticked box (AWX sends false) keeps verification on; only ticking turns it off.
    assert render(env["PROXMOX_VALIDATE_CERTS"], {**values, "skip_tls_verify": True}) == "false"
    assert [f for f in ct["inputs"]["fields"] if f["id"] == "token_secret"][0]["secret"] is True


def test_vault_credentials_inject_the_modules_env_fallbacks():
    # Both Vault modules declare their connection options once, in vault-client's module_options.rs.
    fallbacks = module_env_fallbacks().get("vault-client", set())
    # The modules read VAULT_ADDR/VAULT_TOKEN/…: an empty set means the scan (or the options) broke.
    assert {"VAULT_ADDR", "VAULT_TOKEN"} <= fallbacks, fallbacks
    token = load(AWX / "credential_types/vault.yml")
    env = token["injectors"]["env"]
    # VAULT_SKIP_VERIFY is read by the module directly (it inverts validate_certs), not as a fallback.
    assert set(env) - {"VAULT_SKIP_VERIFY"} <= fallbacks, fallbacks
    assert {"VAULT_ADDR", "VAULT_TOKEN", "VAULT_CACERT"} <= set(env)
    approle = load(AWX / "credential_types/vault_approle.yml")
    assert set(approle["injectors"]["env"]) <= fallbacks
    assert {"ANSIBLE_HASHI_VAULT_AUTH_METHOD", "ANSIBLE_HASHI_VAULT_ROLE_ID", "ANSIBLE_HASHI_VAULT_SECRET_ID"} <= \
        set(approle["injectors"]["env"])


def test_vault_credential_renders_ca_and_tls_only_when_given():
    env = load(AWX / "credential_types/vault.yml")["injectors"]["env"]
    tower = {"filename": {"cacert": "/runner/env/tmpXYZ"}}
    base = {"url": "https://vault.example.com:8200", "token": "canary-token", "tower": tower,
            "skip_verify": False, "namespace": "", "cacert": ""}
    r = {k: render(v, base) for k, v in env.items()}
    assert r["VAULT_ADDR"] == "https://vault.example.com:8200" and r["VAULT_TOKEN"] == "canary-token"
    assert r["VAULT_CACERT"] == "" and r["VAULT_SKIP_VERIFY"] == "" and r["VAULT_NAMESPACE"] == ""
    # Inputs never given at all (AWX leaves them out of the namespace) render the same way.
    r = {k: render(v, {"url": "u", "token": "t", "tower": tower}) for k, v in env.items()}
    assert r["VAULT_CACERT"] == "" and r["VAULT_SKIP_VERIFY"] == "" and r["VAULT_NAMESPACE"] == ""
    r = {k: render(v, {**base, "cacert": "-----BEGIN CERTIFICATE-----", "skip_verify": True}) for k, v in env.items()}
    assert r["VAULT_CACERT"] == "/runner/env/tmpXYZ" and r["VAULT_SKIP_VERIFY"] == "true"
    approle = load(AWX / "credential_types/vault_approle.yml")["injectors"]["extra_vars"]
    assert {k: render(v, {"role_id": "r", "secret_id": "s"}) for k, v in approle.items()} == {
        "vault_auth_method": "approle", "vault_role_id": "r", "vault_secret_id": "s"}
    # The names are the site variables the playbooks hand to the modules.
    connections = REPO / "playbooks/vars/connections.yml"
    if connections.exists():
        text = connections.read_text()
        for var in approle:
            assert var in text, var


# --- job templates ---------------------------------------------------------------------------------

CONTRACT_PLAYBOOKS = {f"playbooks/{p}" for p in (
    "site.yaml", "start.yaml", "stop.yaml", "status.yaml", "deprovision.yaml", "scale.yaml", "remediate.yaml",
    "proxmox_access.yaml", "restore_point.yaml", "restore.yaml", "etcd_backup.yaml")}

def test_job_templates_use_real_playbooks_and_ask_for_the_cluster():
    templates = {p.name: load(p) for p in sorted((AWX / "job_templates").glob("*.yml"))}
    assert templates["provision.yml"]["playbook"] == "playbooks/site.yaml"
    cred_names = {ct["name"] for _, ct in credential_types()}
    assert (REPO / "playbooks/site.yaml").is_file()
    for name, jt in templates.items():
        # The playbooks of the flow's contract (the CLI runs the same ones).
        assert jt["playbook"] in CONTRACT_PLAYBOOKS, (name, jt["playbook"])
        assert jt["job_type"] == "run" and jt["survey_enabled"] is True, name
        assert set(jt["credentials"]) <= cred_names, (name, jt["credentials"])
        spec = jt["survey_spec"]["spec"]
        by_var = {q["variable"]: q for q in spec}
        q = by_var["cluster_name"]
        assert q["type"] == "text" and q["required"] is True and q["min"] >= 1 and q["max"] == 54, q
        playbooks = "\n".join(p.read_text() for p in (REPO / "playbooks").rglob("*.y*ml"))
        for q in spec:
            assert q["question_name"] and q["type"] in {"text", "multiplechoice", "integer", "password"}, q
            assert re.search(rf"\b{q['variable']}\b", playbooks), f"{name}: no playbook reads {q['variable']}"
            if q["type"] == "multiplechoice":
                assert q["default"] in q["choices"], q
    site = (REPO / "playbooks/site.yaml").read_text()
    assert "force_install" in site
    assert templates["provision.yml"]["survey_spec"]["spec"][1]["variable"] == "force_install"
