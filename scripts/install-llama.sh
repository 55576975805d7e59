#!/usr/bin/env bash
# Installs llama-cpp-python (the `local` extra's engine) into a virtualenv, built for a CPU
# baseline rather than for this machine's CPU.
#
# Why: llama-cpp-python compiles llama.cpp from source, by default with GGML_NATIVE (every
# instruction set the build machine's CPU reports). Machines here report AMX, and under their
# hypervisor ggml's AMX kernels crash the process (SIGSEGV at `ldtilecfg`) on the first prompt
# longer than a few tokens. A baseline build (x86-64-v3: AVX2, FMA, F16C; no AVX-512, no AMX)
# runs on every x86-64 machine of the last decade, and a wheel built on one machine works on
# the next one.
#
# pip's own wheel cache is keyed by the source archive, not by CMAKE_ARGS, so it could hand
# back a wheel built with other flags: the wheel is built once into a cache directory keyed by
# the version and the flags, and installed from there.
#
# Usage: scripts/install-llama.sh PYTHON [VERSION_SPEC]
set -euo pipefail
python="$1"
spec="${2:-llama-cpp-python>=0.3}"

case "$(uname -m)" in
    x86_64 | amd64)
        flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        flags="$flags -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
        ;;
    *) flags="-DGGML_NATIVE=OFF" ;;
esac

# The newest release the spec allows, so the cache key names a version.
version="$("$python" -m pip index versions llama-cpp-python 2>/dev/null \
    | sed -n 's/^llama-cpp-python (\([^)]*\)).*/\1/p')"
[ -n "$version" ] || { echo "install-llama: cannot find llama-cpp-python on the index" >&2; exit 1; }
case "$spec" in *"=="*) version="${spec##*==}" ;; esac

key="$(printf '%s %s' "$version" "$flags" | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/parley/wheels/llama-$key"
if ! compgen -G "$cache/llama_cpp_python-*.whl" >/dev/null; then
    mkdir -p "$cache"
    echo "install-llama: building llama-cpp-python $version for a CPU baseline (about 5 minutes, once)"
    CMAKE_ARGS="$flags" "$python" -m pip wheel --quiet --disable-pip-version-check \
        --no-deps --no-cache-dir --wheel-dir "$cache" "llama-cpp-python==$version"
fi
"$python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    "$cache"/llama_cpp_python-*.whl
