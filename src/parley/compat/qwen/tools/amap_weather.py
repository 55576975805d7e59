"""Qwen-Agent's `amap_weather`: a city's weather now, from AMap's (Gaode's) web API.

The key comes from the cfg's `token` or `$AMAP_TOKEN`, as in Qwen-Agent. The place's
administrative code is looked up with AMap's district API (Qwen-Agent downloads AMap's code
table instead, which needs a download at start), then its weather with the weather API. The
API's address is `https://restapi.amap.com`, or the cfg's `api_base` (or `$AMAP_API_BASE`):
an operator's setting, never the model's, so it is fetched as configured.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from parley.compat.qwen.tools.base import BaseTool, register_tool
from parley.errors import ConfigurationError, ToolExecutionError

__all__ = ["AmapWeather"]

API_BASE = "https://restapi.amap.com"


@register_tool("amap_weather")
class AmapWeather(BaseTool):
    """The weather of a place in China (cfg: `token`, `api_base`, `timeout`)."""

    description = "获取对应城市的天气数据"
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "location": {
                "type": "string",
                "description": "城市/区具体名称，如`北京市海淀区`请描述为`海淀区`",  # noqa: RUF001  (Qwen-Agent's text)
            }
        },
        "required": ["location"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.token = str(self.cfg.get("token") or os.environ.get("AMAP_TOKEN", ""))
        if not self.token:
            raise ConfigurationError(
                "amap_weather needs an AMap web API key: set $AMAP_TOKEN or the cfg's token "
                "(get one at https://lbs.amap.com/api/webservice/guide/create-project/get-key)"
            )
        base = self.cfg.get("api_base") or os.environ.get("AMAP_API_BASE") or API_BASE
        self.api_base = str(base).rstrip("/")
        self.request_timeout = float(self.cfg.get("timeout", 10.0))

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        """The weather and temperature at `location`, in Qwen-Agent's sentence."""
        location = str(self._verify_json_format_args(params)["location"])
        districts = self._get("/v3/config/district", keywords=location, subdistrict=0)
        found = districts.get("districts") or []
        if not found:
            raise ToolExecutionError(f"location {location} not found", tool_name=self.name)
        weather = self._get("/v3/weather/weatherInfo", city=found[0]["adcode"])
        lives = weather.get("lives") or []
        if not lives:
            raise ToolExecutionError(f"no weather for {location}", tool_name=self.name)
        return f"{location}的天气是{lives[0]['weather']}温度是{lives[0]['temperature']}度。"

    def _get(self, path: str, **query: Any) -> dict[str, Any]:
        import httpx  # noqa: PLC0415

        try:
            response = httpx.get(
                self.api_base + path,
                params={**query, "key": self.token},
                timeout=self.request_timeout,
            )
            data: dict[str, Any] = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ToolExecutionError(f"the AMap API failed: {exc}", tool_name=self.name) from exc
        if str(data.get("status")) != "1":
            info = data.get("info") or data
            raise ToolExecutionError(f"the AMap API refused: {info}", tool_name=self.name)
        return data
