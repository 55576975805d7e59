#!/usr/bin/env bash
# Installs the system packages the test suite drives for real, so `make check` works on a fresh
# machine (CI's included) without a hand-made step:
#   bubblewrap  the code interpreter's sandbox (its tests also run the weaker modes without it)
#   postgresql  the server tests/_external.py starts a throwaway cluster of (initdb, pg_ctl)
#   chromium    the headless browser the web page's tests drive through Playwright
#   espeak-ng   the local voice's fallback engine (parley.providers.local.speech), when piper is not installed
#   haproxy     the load balancer in front of the multi-replica fault tests (tests/service/cluster),
#               which start it themselves: the system service it ships is stopped and disabled
#   nodejs, npm the JavaScript LangGraph SDK's tests (tests/service/langgraph/test_js_sdk.py)
# Idempotent and quiet: it prints nothing and runs no apt when everything is there.
# Not root: it installs nothing, says in one line what is missing, and exits 0 (those tests skip
# on a developer's machine and fail under CI=true, where a skip must not pass for a success).
set -euo pipefail

have_postgres() {
    compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || command -v pg_ctl >/dev/null
}

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
have_postgres || missing+=(postgresql)
command -v chromium >/dev/null || missing+=(chromium)
command -v espeak-ng >/dev/null || missing+=(espeak-ng)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup-system: ${missing[*]} missing and not root, so not installed:" \
            "the tests that need them skip here and fail under CI=true" \
            "(run scripts/setup-system.sh as root)"
        exit 0
    fi
    # apt's output goes to a log shown only on failure; one `update` serves all the packages.
    # --no-install-recommends: chromium's recommends (GL drivers, printing, desktop services)
    # are large and headless tests need none of them; its fonts (DejaVu) are a dependency.
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    if ! { apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}"; } >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        echo "setup-system: could not install ${missing[*]}" >&2
        # Under CI the tests needing them would fail anyway: stop here, where the cause shows.
        if [ "${CI:-}" = "true" ]; then exit 1; fi
        exit 0
    fi
    # Debian's package starts haproxy as a service where the init system lets it; the tests
    # run their own (on ports of their own), so a system one would only sit there.
    if [[ " ${missing[*]} " == *" haproxy "* ]]; then
        service haproxy stop >/dev/null 2>&1 || true
        update-rc.d haproxy disable >/dev/null 2>&1 || true
        if command -v systemctl >/dev/null; then systemctl disable haproxy >/dev/null 2>&1 || true; fi
    fi
fi

# PostgreSQL refuses to run as root, so as root the tests run it as `postgres`. Debian's package
# creates that user; binaries that came another way may not have.
if [ "$(id -u)" -eq 0 ] && have_postgres && ! id postgres >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin postgres
fi
