"""The multi-agent package's public surface, held to the same rules as the others'."""

from __future__ import annotations

import pytest

from tests import test_public_api as api

MODULES = [
    "parley.agents.multi",
    "parley.agents.multi.events",
    "parley.agents.multi.formatting",
    "parley.agents.multi.group",
    "parley.agents.multi.hub",
    "parley.agents.multi.human",
    "parley.agents.multi.router",
    "parley.agents.multi.selection",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_complete_and_resolves(name: str) -> None:
    api.test_all_is_sorted_and_resolves(name)
    api.test_all_names_every_public_class_and_function_defined_there(name)
