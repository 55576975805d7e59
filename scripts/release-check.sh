#!/usr/bin/env bash
# The release build, checked as a user would meet it: build the sdist and the wheel (PyPA's
# `build`: the sdist first, then the wheel from the unpacked sdist, so a file the sdist leaves
# out fails here), install the wheel with the `local` and `service` extras into a clean
# virtualenv, and run the README's quick start against that install, outside the checkout:
# `parley chat` on the embedded model, then `parley serve` answering `/info` and `/invoke`
# (scripts/release_smoke.py).
#
# The clean virtualenv gets the versions uv.lock pins, as `make install` does: pip installs the
# wheel and its dependencies from the lock's requirements (`uv export`), every file checked
# against its hash (the wheel's own too), so nothing the lock does not name comes in.
# llama-cpp-python comes from scripts/install-llama.sh's wheel cache (built once for a CPU
# baseline at the lock's version, as `make install` does).
#
# Usage: scripts/release-check.sh BUILD_PYTHON UV [BASE_PYTHON]
#   BUILD_PYTHON  an interpreter with `build` installed (the dev virtualenv's)
#   UV            the uv that reads uv.lock (`make install` installs it into .tools)
#   BASE_PYTHON   the interpreter the clean virtualenv is made from (default python3)
# The wheel and sdist are left in dist/.
set -euo pipefail
build_python="$1"
uv="$2"
base_python="${3:-python3}"
cd "$(dirname "$0")/.."

rm -rf dist
"$build_python" -m build --outdir dist . >dist.log 2>&1 || { cat dist.log >&2; rm -f dist.log; exit 1; }
rm -f dist.log
wheel="$(echo dist/parley-*.whl)"
sdist="$(echo dist/parley-*.tar.gz)"
[ -f "$wheel" ] && [ -f "$sdist" ] || { echo "release-check: no wheel or sdist in dist/" >&2; exit 1; }
version="${wheel#dist/parley-}"
version="${version%%-*}"
echo "release-check: built $sdist and $wheel (version $version)"

# A checkout of git names its commit in the version (hatch-vcs); the fallback there would mean
# the version no longer comes from git.
if git rev-parse --git-dir >/dev/null 2>&1; then
    commit="$(git rev-parse HEAD)"
    if ! git describe --tags --exact-match >/dev/null 2>&1; then
        case "$version" in *"+g${commit:0:7}"*) ;; *)
            echo "release-check: version $version does not name commit ${commit:0:7}" >&2
            exit 1 ;;
        esac
    fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$base_python" -m venv "$work/venv"
py="$work/venv/bin/python"
bash scripts/install-llama.sh "$py"
# The lock's packages for `local` and `service` (llama-cpp-python is installed above), then the
# wheel, each with its hash: pip's hash-checking mode refuses any package without one.
"$uv" export --quiet --locked --format requirements-txt --no-header --no-emit-project --no-dev \
    --extra local --extra service --no-emit-package llama-cpp-python -o "$work/locked.txt"
echo "parley[local,service] @ file://$(pwd)/$wheel --hash=sha256:$(sha256sum "$wheel" | cut -d' ' -f1)" \
    >>"$work/locked.txt"
"$py" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$work/locked.txt"

# Run from elsewhere, with no path pointing back here: only the installed wheel can answer.
smoke="$(pwd)/scripts/release_smoke.py"
cd "$work"
env -u PYTHONPATH "$py" "$smoke" --venv "$work/venv" --version "$version"
