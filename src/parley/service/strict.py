r"""Strict request input: what a route accepts, every database can store and JSON can answer.

Python's `json` reads more than JSON: `NaN` and `Infinity`, numbers too big for a float
(`1e999` is infinite), and strings holding lone surrogates (`"\ud800"`) or NUL (`"\u0000"`).
None of those can be stored everywhere or sent back: a NaN feedback score broke a NOT NULL
column, a lone surrogate failed every write and even the 422 that echoed it, and PostgreSQL
refuses NUL in text. `StrictRoute` reads a JSON body so that all of those, and a body that
is not JSON text at all (not UTF-8, nested too deep, an integer of thousands of digits), are
FastAPI's 422 `json_invalid` rather than a 500 or a 400. A path parameter holding NUL
(`/threads/%00`) names nothing that can exist: 404, before any database sees it.

```python
router = APIRouter(route_class=StrictRoute)
```
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from parley.errors import NotFoundError

__all__ = ["StrictRoute", "loads_json"]

# A string escape that may be a surrogate or NUL: only then are the strings looked at.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a float")
    return value


def _check_strings(value: Any) -> None:
    """Fail on a string (a key too) with a lone surrogate or NUL, anywhere in `value`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ValueError("a string holds NUL (\\u0000)")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("a string holds a lone surrogate: it is not Unicode") from None
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def loads_json(body: bytes) -> Any:
    """`body` parsed as standard JSON with Unicode strings (no NaN, no lone surrogates, no NUL).

    The body is UTF-8 (a byte order mark is skipped), as RFC 8259 has JSON between systems;
    `json.loads` would also guess UTF-16 and let encoded surrogates through.

    Raises:
        json.JSONDecodeError: It is not (FastAPI answers that with a 422 `json_invalid`).
    """
    try:
        text = body.decode("utf-8-sig")
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        if _SUSPECT_ESCAPE.search(text):
            _check_strings(value)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise json.JSONDecodeError(f"not standard JSON: {exc}", "", 0) from None
    return value


class _StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_strict_json"):
            self._strict_json = loads_json(await self.body())
        return self._strict_json


class StrictRoute(APIRoute):
    """A route whose JSON body is read with `loads_json` and whose path parameters hold no NUL.

    A path parameter with NUL is a 404 (`NotFoundError`: an id that no row can have).
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, given a request that reads its body strictly."""
        handle = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            for name, value in request.path_params.items():
                if isinstance(value, str) and "\x00" in value:
                    what = name.removesuffix("_id")
                    raise NotFoundError(f"{what} {value!r} not found", status_code=404)
            return await handle(_StrictJSONRequest(request.scope, request.receive))

        return strict_handler
