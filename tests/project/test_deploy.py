"""The container and the Kubernetes manifests, checked offline: every manifest
against the Kubernetes schemas kubernetes-validate ships, the kustomizations'
references, the parts that must agree (worker count, Service, ports), and the
Dockerfile's install against the README's (`make setup`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from loadruns import ROOT

from slogate import scenarios

KUBE = ROOT / "deploy" / "kubernetes"
KUSTOMIZATIONS = sorted(KUBE.glob("*/kustomization.yaml"))
NOT_MANIFESTS = {"kustomization.yaml", "scenario.yaml"}
MANIFESTS = sorted(p for p in KUBE.rglob("*.yaml") if p.name not in NOT_MANIFESTS)


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def validate(doc: dict) -> None:
    kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def by_kind(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def pod_spec(doc: dict) -> dict:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(KUBE)))
def test_every_manifest_validates_against_the_kubernetes_schemas(path):
    for doc in documents(path):
        validate(doc)


def test_a_manifest_with_a_mistake_is_caught():
    service = documents(KUBE / "base" / "master-service.yaml")[0]
    service["spec"]["ports"][0]["port"] = "5557"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(service)


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=lambda p: p.parent.name)
def test_every_kustomization_reference_resolves(path):
    k = yaml.safe_load(path.read_text())
    for ref in k.get("resources", []):
        target = path.parent / ref
        assert target.is_file() or (target / "kustomization.yaml").is_file(), ref
    for generator in k.get("configMapGenerator", []):
        for file in generator["files"]:
            assert (path.parent / file).is_file(), file


def test_the_scenario_of_the_configmap_is_valid():
    loaded = scenarios.load(KUBE / "base" / "scenario.yaml")
    assert loaded[0].name == "k8s-chat"


def test_master_workers_and_service_agree():
    docs = by_kind([d for p in (KUBE / "base").glob("*.yaml") if p.name not in NOT_MANIFESTS
                    for d in documents(p)])  # fmt: skip
    master, workers = docs[("Job", "slogate-master")], docs[("Job", "slogate-worker")]
    service = docs[("Service", "slogate-master")]
    args = pod_spec(master)["containers"][0]["args"]
    assert int(flag(args, "--expect-workers")) == workers["spec"]["parallelism"]
    assert workers["spec"]["completions"] == workers["spec"]["parallelism"]
    labels = master["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    worker_args = pod_spec(workers)["containers"][0]["args"]
    assert flag(worker_args, "--master-host") == service["metadata"]["name"]
    port = service["spec"]["ports"][0]["targetPort"]
    assert int(flag(worker_args, "--master-port")) == port == int(flag(args, "--master-bind-port"))
    for job in (master, workers):
        container = pod_spec(job)["containers"][0]
        assert "cpu" in container["resources"]["requests"]
        assert "cpu" not in container["resources"].get("limits", {})  # throttling stalls the loop
        assert pod_spec(job)["securityContext"]["runAsNonRoot"] is True


def test_the_nightly_cronjob_and_its_workers_agree():
    cron = documents(KUBE / "nightly" / "master-cronjob.yaml")[0]
    workers = documents(KUBE / "nightly" / "worker-deployment.yaml")[0]
    args = pod_spec(cron)["containers"][0]["args"]
    assert int(flag(args, "--expect-workers")) == workers["spec"]["replicas"]
    assert flag(args, "--baseline") == "auto"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl to render kustomize")
@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=lambda p: p.parent.name)
def test_kustomize_renders_valid_manifests(path):
    done = subprocess.run(["kubectl", "kustomize", str(path.parent)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    for doc in docs:
        validate(doc)
    kinds = {d["kind"] for d in docs}
    assert {"ConfigMap", "Service", "PersistentVolumeClaim"} <= kinds
    assert kinds & {"Job", "CronJob"}


# What differs on purpose: the image installs the package itself, not an
# editable checkout with the dev extra, and keeps no pip cache.
NOT_THE_INSTALL = {"--no-cache-dir", "-e", ".", "'.[dev]'"}


def install_commands(text: str) -> list[list[str]]:
    """The pip flags of each install line (the venv's path left out)."""
    lines = re.findall(r"pip install ([^\n\\&]*)", text)
    return [[word for word in line.split() if word not in NOT_THE_INSTALL] for line in lines]


def test_the_dockerfile_installs_as_the_readme_does():
    dockerfile = (ROOT / "Dockerfile").read_text()
    setup = (ROOT / "Makefile").read_text().split("$(BIN)/slogate:")[1].split("\nsetup:")[0]
    setup = setup.replace("$(LOCK)", "constraints.txt")
    assert install_commands(dockerfile) == install_commands(setup)
    assert len(install_commands(dockerfile)) == 2
    assert re.search(r"^FROM python:[\d.]+-slim$", dockerfile, re.M)
    user = re.findall(r"^USER (\S+)$", dockerfile, re.M)
    assert user and user[-1] not in ("root", "0")
    assert 'ENTRYPOINT ["slogate"]' in dockerfile
