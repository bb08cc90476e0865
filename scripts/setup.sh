#!/usr/bin/env bash
# One-shot, idempotent setup on a fresh Debian 12 machine:
#   apt packages -> project-local venv (LibTorch from the PyPI torch wheel + test oracles) -> Release build.
# Usage: scripts/setup.sh [--no-build | --configure-only]
#
# The LibTorch to build against (docs/training.md, "The cluster's own CUDA"):
#   SINKLM_LIBTORCH unset   the pinned PyPI wheel below (CUDA 13.0: an NVIDIA driver >= 580)
#   SINKLM_LIBTORCH=DIR     a LibTorch prefix (DIR/share/cmake/Torch/TorchConfig.cmake): an unzipped libtorch, a
#                           cluster's module, or another venv's site-packages/torch; the project venv keeps the
#                           pinned wheel for the test oracles
#   SINKLM_LIBTORCH=SPEC    a pip requirement for the venv's torch instead of the pinned one: torch==VERSION, a
#                           .whl file or its URL (e.g. a CUDA 12.6 wheel from download.pytorch.org)
# SINKLM_BUILD_DIR: the build directory (default build/).
# SINKLM_LLAMA_CPP=1: also build llama.cpp's Python module (llama-cpp-python, from source: about 5 minutes on 2
#   cores), which tests/export/gguf_export_test.py then compares `sinklm export gguf` files with; CI does not.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Pinned: torch 2.11.0 on PyPI is built for CUDA 13.0, the toolkit our machines carry (nvcc 13.0).
TORCH_VERSION=2.11.0
APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config python3-venv
  openmpi-bin libopenmpi-dev libyaml-cpp-dev libgtest-dev nlohmann-json3-dev libcpp-httplib-dev
  libpcre2-dev libsentencepiece-dev libssl-dev curl)
# data: ICU (NFC for tokenizer.json), zlib (gzip/dictzip corpus sources and .jsonl.gz inputs), libzstd (.jsonl.zst
# inputs; the zstd CLI makes them in tests and scripts/bench/bench_prepare), readline (bible-kjv's `bible` program).
APT_PACKAGES+=(libicu-dev zlib1g-dev libzstd-dev zstd libreadline8)
# train: tensorboard is the reader of the trainer's event files (tests/train).
# eval: lm-eval (with accelerate, which its HF backend imports) is the reference of tests/eval; its [api]
# extra (tenacity, aiohttp) runs its local-completions model against `sinklm serve` (tests/serve).
libtorch="${SINKLM_LIBTORCH:-}"
torch_requirement="torch==${TORCH_VERSION}"
case "$libtorch" in
  "") ;;
  *.whl | http://* | https://* | torch*) [ -d "$libtorch" ] || torch_requirement="$libtorch" ;;
  *) [ -d "$libtorch" ] || {
       echo "[setup] error: SINKLM_LIBTORCH=$libtorch is no directory; give a LibTorch prefix, or a pip requirement" \
            "for torch (torch==VERSION, a .whl file or its URL)" >&2
       exit 2
     } ;;
esac
build_dir="${SINKLM_BUILD_DIR:-build}"
# export: gguf reads the files `sinklm export gguf` writes (tests/export).
PIP_PACKAGES=("$torch_requirement" numpy transformers tokenizers safetensors tiktoken matplotlib openai "lm-eval[api]" accelerate tensorboard gguf)
# data: GPT-2's tiktoken rank file (whisper/assets/gpt2.tiktoken) ships in openai-whisper; its own deps are unneeded.
PIP_NO_DEPS_PACKAGES=(openai-whisper)

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] apt: installing ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Prefer a python3 that has venv+pip working (pyenv or Debian's).
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=".venv/.sinklm-pip-${TORCH_VERSION}-$(printf '%s\n' "${PIP_PACKAGES[@]}" "${PIP_NO_DEPS_PACKAGES[@]}" | sha256sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "[setup] pip: installing ${PIP_PACKAGES[*]} (torch wheel is large; cached by pip)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "${PIP_PACKAGES[@]}"
  .venv/bin/python -m pip install -q --no-deps "${PIP_NO_DEPS_PACKAGES[@]}"
  touch "$stamp"
fi
if [ "${SINKLM_LLAMA_CPP:-}" = 1 ] && ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  # Portable SIMD flags, not -march=native: ggml's AMX path dies with SIGILL where the kernel or a sandbox does
  # not grant AMX tiles, as on one of our Intel machines.
  flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  grep -qw avx512f /proc/cpuinfo && flags+=" -DGGML_AVX512=ON"
  echo "[setup] pip: building llama-cpp-python (SINKLM_LLAMA_CPP=1; about 5 minutes on 2 cores)"
  CMAKE_ARGS="$flags" .venv/bin/python -m pip install -q --no-cache-dir llama-cpp-python
fi

[ "${1:-}" = "--no-build" ] && exit 0

if [ -d "$libtorch" ]; then
  torch_prefix="$(cd "$libtorch" && pwd)"
  [ -f "$torch_prefix/share/cmake/Torch/TorchConfig.cmake" ] || {
    echo "[setup] error: SINKLM_LIBTORCH=$libtorch has no share/cmake/Torch/TorchConfig.cmake; point it at a LibTorch" \
         "prefix (an unzipped libtorch, or a torch package directory such as .../site-packages/torch)" >&2
    exit 2
  }
  echo "[setup] LibTorch from SINKLM_LIBTORCH: $torch_prefix"
else
  torch_prefix="$(.venv/bin/python -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# Torch_DIR as well as the prefix: find_package caches it, so switching LibTorch in an existing build needs both.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DTorch_DIR="$torch_prefix/share/cmake/Torch" \
  -DPython3_EXECUTABLE="$root/.venv/bin/python" "${launcher[@]}"
[ "${1:-}" = "--configure-only" ] && exit 0
cmake --build "$build_dir" -j "$(nproc)"
echo "[setup] built: $build_dir/sinklm"
