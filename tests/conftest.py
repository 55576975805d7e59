"""Suite-wide settings: no test reaches the internet."""

from __future__ import annotations

import parley.models.base

# Provider adapters refuse any host but this machine (local wire-format servers still work).
parley.models.base.ALLOW_MODEL_REQUESTS = False
