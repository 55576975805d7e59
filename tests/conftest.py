"""Suite-wide settings: no test reaches the internet; CI's rules; the real external servers."""

from __future__ import annotations

import parley.models.base

# Under CI=true no skip passes and Hypothesis replays fixed examples (tests/_ci.py); PostgreSQL
# and Chromium fixtures (postgres_url, postgres_db_url, chromium_browser, ...); `pytester`, for
# the tests of the suite's own rules; parley's spans into memory (tests/tracing/fixtures.py).
pytest_plugins = ["tests._ci", "tests._external", "pytester", "tests.tracing.fixtures"]

# Provider adapters refuse any host but this machine (local wire-format servers still work).
parley.models.base.ALLOW_MODEL_REQUESTS = False
