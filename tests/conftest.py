"""Suite-wide settings: no test reaches the internet; the real external servers' fixtures."""

from __future__ import annotations

import parley.models.base

# PostgreSQL and Chromium fixtures (postgres_url, postgres_db_url, chromium_browser, ...).
pytest_plugins = ["tests._external"]

# Provider adapters refuse any host but this machine (local wire-format servers still work).
parley.models.base.ALLOW_MODEL_REQUESTS = False
