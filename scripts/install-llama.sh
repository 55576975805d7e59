#!/usr/bin/env bash
# Installs llama-cpp-python (the `local` extra's engine) into a virtualenv, built for a CPU
# baseline rather than for this machine's CPU, at the version uv.lock pins.
#
# Why: llama-cpp-python compiles llama.cpp from source, by default with GGML_NATIVE (every
# instruction set the build machine's CPU reports). Machines here report AMX, and under their
# hypervisor ggml's AMX kernels crash the process (SIGSEGV at `ldtilecfg`) on the first prompt
# longer than a few tokens. A baseline build (x86-64-v3: AVX2, FMA, F16C; no AVX-512, no AMX)
# runs on every x86-64 machine of the last decade, and a wheel built on one machine works on
# the next one. So `make install` leaves llama-cpp-python out of uv's sync and runs this script
# after it: uv would build it with the native flags.
#
# The version is uv.lock's (the one the suite ran with), its source archive checked against the
# lock's hash. pip's own wheel cache is keyed by the source archive, not by CMAKE_ARGS, so it
# could hand back a wheel built with other flags: the wheel is built once into a cache
# directory keyed by the version and the flags, and installed from there.
#
# Usage: scripts/install-llama.sh PYTHON
#   PYTHON  the interpreter of the virtualenv to install into (Python 3.11 or newer, with pip)
set -euo pipefail
python="$1"
lock="$(cd "$(dirname "$0")/.." && pwd)/uv.lock"

case "$(uname -m)" in
    x86_64 | amd64)
        flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        flags="$flags -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
        ;;
    *) flags="-DGGML_NATIVE=OFF" ;;
esac

# "VERSION sha256:HEX": the lock's llama-cpp-python and its source archive's hash (PyPI has
# no wheels of it).
read_lock='
import sys, tomllib
with open(sys.argv[1], "rb") as file:
    packages = tomllib.load(file)["package"]
[llama] = [p for p in packages if p["name"] == "llama-cpp-python"]
print(llama["version"], llama["sdist"]["hash"])
'
locked="$("$python" -c "$read_lock" "$lock")" \
    || { echo "install-llama: no llama-cpp-python source archive in $lock" >&2; exit 1; }
version="${locked%% *}"
hash="${locked#* }"

key="$(printf '%s %s' "$version" "$flags" | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/parley/wheels/llama-$key"
if ! compgen -G "$cache/llama_cpp_python-*.whl" >/dev/null; then
    mkdir -p "$cache"
    echo "install-llama: building llama-cpp-python $version for a CPU baseline (about 5 minutes, once)"
    requirement="$(mktemp)"
    trap 'rm -f "$requirement"' EXIT
    echo "llama-cpp-python==$version --hash=$hash" >"$requirement"
    CMAKE_ARGS="$flags" "$python" -m pip wheel --quiet --disable-pip-version-check \
        --no-deps --no-cache-dir --require-hashes --wheel-dir "$cache" -r "$requirement"
fi
"$python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    "$cache"/llama_cpp_python-*.whl
