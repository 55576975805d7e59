"""Qwen-Agent's tools (`parley.compat.qwen.tools`): names, parameters, results, refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from parley.compat.qwen import FnCallAgent
from parley.compat.qwen.agents import DocQAAgent
from parley.compat.qwen.tools import (
    TOOL_REGISTRY,
    AmapWeather,
    BaseTool,
    BaseToolWithFileAccess,
    ImageGen,
    MCPManager,
    PythonExecutor,
    Retrieval,
    SimpleDocParser,
    WebExtractor,
    register_tool,
)
from parley.errors import ConfigurationError, ToolArgumentsError, ToolExecutionError
from parley.providers.openai.server import OpenAIServer, Reply
from parley.tools import Tool
from parley.tools.builtin import FetchNotAllowedError, PathNotAllowedError
from parley.tools.builtin.code_interpreter import CodeInterpreter
from tests._requires import require_module
from tests.compat._qwen_tools import demo_mcp_servers
from tests.compat.qwen_examples._doc_support import (
    message_text,
    serve_files,
    text_only,
    tool_call,
)

MANUAL = "# Manual\n\nThe blue valve opens the cooling loop.\n\n# Safety\n\nWear gloves."
SECRET = "top secret outside the roots"


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A working directory holding a manual, a work dir, and a secret outside both."""
    cwd, work, outside = tmp_path / "cwd", tmp_path / "work", tmp_path / "outside"
    for folder in (cwd, work, outside):
        folder.mkdir()
    (cwd / "manual.md").write_text(MANUAL)
    (outside / "secret.txt").write_text(SECRET)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PARLEY_FETCH_ALLOWED_HOSTS", raising=False)
    return {"cwd": cwd, "work": work, "outside": outside}


# -- names and the registry ------------------------------------------------------------------


QWEN_NAMES = {
    "code_interpreter",
    "python_executor",
    "web_extractor",
    "retrieval",
    "doc_parser",
    "simple_doc_parser",
    "storage",
    "image_gen",
    "amap_weather",
}


def test_every_qwen_tool_is_registered_under_its_name_in_parleys_registry() -> None:
    assert set(TOOL_REGISTRY) >= QWEN_NAMES
    assert BaseTool is Tool
    assert TOOL_REGISTRY["code_interpreter"] is CodeInterpreter
    assert TOOL_REGISTRY["simple_doc_parser"] is SimpleDocParser
    for name in QWEN_NAMES:
        assert TOOL_REGISTRY[name].name == name


@pytest.mark.parametrize(
    ("cls", "required"),
    [
        (SimpleDocParser, ["url"]),
        (WebExtractor, ["url"]),
        (Retrieval, ["query", "files"]),
        (ImageGen, ["prompt"]),
        (AmapWeather, ["location"]),
        (PythonExecutor, ["code"]),
    ],
)
def test_parameters_are_qwen_agents(cls: type[Tool], required: list[str]) -> None:
    assert isinstance(cls.parameters, dict)
    assert cls.parameters["required"] == required
    assert set(required) <= set(cls.parameters["properties"])


def test_a_tool_registered_here_is_found_by_an_agent(folders: dict[str, Path]) -> None:
    @register_tool("qwen_tools_test_echo")
    class Echo(BaseTool):
        description = "Echo."
        parameters = [{"name": "text", "type": "string", "required": True}]

        def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
            return str(self._verify_json_format_args(params)["text"])

    try:
        bot = FnCallAgent(function_list=["qwen_tools_test_echo"], llm={"model_type": "local"})
        assert isinstance(bot.function_map["qwen_tools_test_echo"], Echo)
        assert bot._call_tool("qwen_tools_test_echo", '{"text": "hi"}') == "hi"
    finally:
        del TOOL_REGISTRY["qwen_tools_test_echo"]


# -- BaseToolWithFileAccess: copies, and what it refuses -------------------------------------


class Lister(BaseToolWithFileAccess):
    name = "qwen_tools_test_lister"
    description = "Lists its work dir."

    def call(self, params: str | dict[str, Any], files: Any = None, **kwargs: Any) -> str:
        super().call(params, files=files)
        return ",".join(sorted(os.listdir(self.work_dir)))


def test_local_files_under_the_roots_are_copied_into_the_work_dir(
    folders: dict[str, Path],
) -> None:
    tool = Lister({"work_dir": str(folders["work"])})
    assert tool.file_access
    assert tool.call("{}", files=["manual.md", str(folders["cwd"] / "manual.md")]) == "manual.md"
    assert (folders["work"] / "manual.md").read_text() == MANUAL


@pytest.mark.parametrize("name", ["/etc/passwd", "../outside/secret.txt", "file:///etc/hostname"])
def test_a_file_outside_the_roots_is_refused_naming_the_roots(
    folders: dict[str, Path], name: str
) -> None:
    tool = Lister({"work_dir": str(folders["work"])})
    with pytest.raises(PathNotAllowedError, match=r"outside the folders .* may copy files from"):
        tool.call("{}", files=[name])
    assert os.listdir(folders["work"]) == []


def test_a_link_in_the_roots_pointing_outside_is_refused(folders: dict[str, Path]) -> None:
    (folders["cwd"] / "notes.txt").symlink_to(folders["outside"] / "secret.txt")
    tool = Lister({"work_dir": str(folders["work"])})
    with pytest.raises(PathNotAllowedError, match="set file_roots"):
        tool.call("{}", files=["notes.txt"])
    assert not (folders["work"] / "notes.txt").exists()


def test_file_roots_in_the_cfg_allow_another_folder(folders: dict[str, Path]) -> None:
    tool = Lister({"work_dir": str(folders["work"]), "file_roots": [str(folders["outside"])]})
    assert tool.call("{}", files=[str(folders["outside"] / "secret.txt")]) == "secret.txt"


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/doc.pdf", "http://169.254.169.254/latest/meta-data/", "http://[::1]/x"],
)
def test_a_url_to_a_private_address_is_refused(folders: dict[str, Path], url: str) -> None:
    tool = Lister({"work_dir": str(folders["work"])})
    with pytest.raises(FetchNotAllowedError, match=r"not allowed|refused|loopback|link-local"):
        tool.call("{}", files=[url])


def test_an_allowed_url_is_downloaded_under_its_last_path_segment(
    folders: dict[str, Path],
) -> None:
    with serve_files({"/a/b/..%2F..%2Fescape.md": (b"# Hi", "text/markdown")}) as site:
        tool = Lister({"work_dir": str(folders["work"]), "allowed_hosts": ["127.0.0.1"]})
        listed = tool.call("{}", files=[f"{site}/a/b/..%2F..%2Fescape.md"])
    assert listed == "escape.md"  # never a path out of the work dir
    assert (folders["work"] / "escape.md").read_text() == "# Hi"


# -- the document tools ----------------------------------------------------------------------


def test_simple_doc_parser_returns_the_text_or_qwen_agents_pages(
    folders: dict[str, Path],
) -> None:
    tool = SimpleDocParser({"work_dir": str(folders["work"])})
    text = tool.call({"url": "manual.md"})
    assert isinstance(text, str)
    assert "The blue valve opens the cooling loop." in text
    pages = SimpleDocParser({"work_dir": str(folders["work"]), "structured_doc": True}).call(
        json.dumps({"url": "manual.md"})
    )
    assert isinstance(pages, list)
    assert pages[0]["page_num"] == 1
    assert any("blue valve" in item.get("text", "") for item in pages[0]["content"])


def test_simple_doc_parser_refuses_a_path_outside_the_roots(folders: dict[str, Path]) -> None:
    tool = SimpleDocParser({"work_dir": str(folders["work"])})
    with pytest.raises(PathNotAllowedError):
        tool.call({"url": str(folders["outside"] / "secret.txt")})


def test_web_extractor_reads_an_allowed_page_and_refuses_paths_and_private_hosts(
    folders: dict[str, Path],
) -> None:
    page = b"<html><body><h1>Valves</h1><p>Turn the blue valve slowly.</p></body></html>"
    with serve_files({"/valves": (page, "text/html")}) as site:
        allowed = WebExtractor({"work_dir": str(folders["work"]), "allowed_hosts": ["127.0.0.1"]})
        assert "Turn the blue valve slowly." in allowed.call({"url": f"{site}/valves"})
        with pytest.raises(FetchNotAllowedError):
            WebExtractor({"work_dir": str(folders["work"])}).call({"url": f"{site}/valves"})
    with pytest.raises(ToolArgumentsError, match="web pages only"):
        allowed.call({"url": "/etc/passwd"})


def test_retrieval_returns_qwen_agents_records_for_the_named_files(
    folders: dict[str, Path],
) -> None:
    tool = Retrieval({"work_dir": str(folders["work"]), "max_ref_token": 500})
    records = tool.call({"query": "blue valve", "files": ["manual.md"]})
    assert [r["url"] for r in records] == ["manual.md"]
    assert any("blue valve" in text for text in records[0]["text"])
    with pytest.raises(PathNotAllowedError):
        tool.call({"query": "secret", "files": [str(folders["outside"] / "secret.txt")]})


# -- image_gen, amap_weather, python_executor, MCPManager ------------------------------------


def test_image_gen_asks_the_image_model_of_its_llm_cfg() -> None:
    with OpenAIServer([Reply(text="![cat](http://images.example/cat.png)")]) as server:
        tool = ImageGen({"llm_cfg": {"model": "wanx", "model_server": server.url}})
        result = tool.call({"prompt": "a cat on a sofa"})
        tool.agent.close_sync()
        (body,) = server.bodies()
    assert result == "![cat](http://images.example/cat.png)"
    assert message_text(body["messages"][-1]) == "a cat on a sofa"
    with pytest.raises(ConfigurationError, match="llm_cfg"):
        ImageGen()


def test_amap_weather_looks_the_place_up_then_its_weather(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AMAP_TOKEN", "amap-key")
    district = {"status": "1", "districts": [{"name": "海淀区", "adcode": "110108"}]}
    weather = {"status": "1", "lives": [{"weather": "晴", "temperature": "21"}]}
    pages = {
        "/v3/config/district": (json.dumps(district).encode(), "application/json"),
        "/v3/weather/weatherInfo": (json.dumps(weather).encode(), "application/json"),
    }
    fetched: list[str] = []
    with serve_files(pages, fetched) as site:
        tool = AmapWeather({"api_base": site})
        assert tool.call({"location": "海淀区"}) == "海淀区的天气是晴温度是21度。"
    assert fetched[0].startswith("/v3/config/district?")
    assert "key=amap-key" in fetched[0]
    assert fetched[1].startswith("/v3/weather/weatherInfo?city=110108")


def test_amap_weather_needs_a_token_and_reports_the_apis_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AMAP_TOKEN", raising=False)
    with pytest.raises(ConfigurationError, match="AMAP_TOKEN"):
        AmapWeather()
    refusal = {"status": "0", "info": "INVALID_USER_KEY"}
    with serve_files(
        {"/v3/config/district": (json.dumps(refusal).encode(), "application/json")}
    ) as site:
        tool = AmapWeather({"token": "bad", "api_base": site})
        with pytest.raises(ToolExecutionError, match="INVALID_USER_KEY"):
            tool.call({"location": "海淀区"})


def test_python_executor_runs_each_snippet_in_a_fresh_sandboxed_interpreter(
    tmp_path: Path,
) -> None:
    tool = PythonExecutor({"work_dir": str(tmp_path)})
    assert tool.call(json.dumps({"code": "x = 6 * 7\nprint(x)"})) == ["42\n", "Done"]
    assert tool.call("```python\nprint('fenced')\n```") == ["fenced\n", "Done"]
    output, report = tool.call({"code": "print(x)"})  # nothing kept from the last call
    assert output == ""
    assert "NameError" in report
    output, report = tool.call({"code": "open('/etc/shadow').read()"})
    assert output == ""
    assert "Error" in report


def test_mcp_manager_opens_a_config_and_returns_its_tools() -> None:
    require_module("mcp", "mcp")
    manager = MCPManager()
    try:
        tools = manager.initConfig(demo_mcp_servers())
        assert "demo-add" in {tool.name for tool in tools}
    finally:
        manager.shutdown()


# -- agents hand files to file tools, and give the model text --------------------------------


def test_an_agent_hands_the_conversations_files_to_a_file_tool(
    folders: dict[str, Path],
) -> None:
    steps = [tool_call("qwen_tools_test_lister", {}), Reply(text="manual.md is there.")]
    with OpenAIServer(steps) as server:
        bot = FnCallAgent(
            function_list=[Lister({"work_dir": str(folders["work"])})],
            llm={"model": "qwen3", "model_server": server.url, "api_key": "EMPTY"},
        )
        messages = [{"role": "user", "content": [{"text": "What files?"}, {"file": "manual.md"}]}]
        response = bot.run_nonstream(messages)
        bot.close_sync()
        first, _ = server.bodies()
    assert response[1]["content"] == "manual.md"  # the tool got files= and copied it
    assert text_only(first["messages"][-1])
    assert message_text(first["messages"][-1]) == "What files?"


def test_an_agents_code_interpreter_copies_the_users_files_from_the_working_directory(
    folders: dict[str, Path],
) -> None:
    # Qwen-Agent's agents hand the user's attached files to `code_interpreter`, which copies
    # them in; one the agent builds takes the working directory as its file root.
    llm = {"model": "qwen3", "model_server": "http://127.0.0.1:9/v1", "api_key": "EMPTY"}
    cfg = {"name": "code_interpreter", "sandbox": "rlimits", "work_dir": str(folders["work"])}
    bot = FnCallAgent(function_list=[cfg], llm=llm)
    interpreter = bot.function_map["code_interpreter"]
    assert isinstance(interpreter, CodeInterpreter)
    assert interpreter.file_roots == [folders["cwd"].resolve()]
    try:
        run = interpreter.run_code(
            "open('manual.md').read()",
            files=["manual.md", str(folders["cwd"] / "manual.md"), str(folders["outside"])],
        )
        # The user's file is there by name; a path elsewhere is still refused, saying why.
        assert run.result == repr(MANUAL)
        assert run.notice is not None
        assert "outside (outside this conversation's files and the file_roots)" in run.notice
    finally:
        interpreter.close()
        bot.close_sync()
    # A tool instance the caller made, or a config naming its own roots, is kept as given.
    own = CodeInterpreter({"sandbox": "rlimits", "work_dir": str(folders["work"])})
    rooted = {**cfg, "file_roots": [str(folders["outside"])]}
    bot = FnCallAgent(function_list=[own, rooted], llm=llm)
    assert own.file_roots == []
    assert bot.function_map["code_interpreter"].file_roots == [  # type: ignore[attr-defined]
        folders["outside"].resolve()
    ]
    own.close()
    bot.function_map["code_interpreter"].close()  # type: ignore[attr-defined]
    bot.close_sync()


def test_doc_qa_agent_answers_in_one_call_from_the_retrieved_passages(
    folders: dict[str, Path],
) -> None:
    with OpenAIServer([Reply(text="It opens the cooling loop.")]) as server:
        bot = DocQAAgent(llm={"model": "qwen3", "model_server": server.url, "api_key": "EMPTY"})
        messages = [
            {
                "role": "user",
                "content": [{"text": "What does the blue valve do?"}, {"file": "manual.md"}],
            }
        ]
        response = bot.run_nonstream(messages)
        bot.close_sync()
        (body,) = server.bodies()
    assert response[-1]["content"] == "It opens the cooling loop."
    assert "tools" not in body
    assert "The blue valve opens the cooling loop." in message_text(body["messages"][0])
    assert text_only(body["messages"][-1])


class Recorder(BaseToolWithFileAccess):
    name = "qwen_tools_test_recorder"
    description = "Says which files it was handed."

    def call(self, params: str | dict[str, Any], files: Any = None, **kwargs: Any) -> str:
        return json.dumps(files)


def test_each_run_hands_its_own_files_and_no_other_runs(folders: dict[str, Path]) -> None:
    steps = [
        tool_call("qwen_tools_test_recorder", {}),
        Reply(text="ok"),
        tool_call("qwen_tools_test_recorder", {}),
        Reply(text="ok"),
    ]
    with OpenAIServer(steps) as server:
        bot = FnCallAgent(
            function_list=[Recorder({"work_dir": str(folders["work"])})],
            llm={"model": "qwen3", "model_server": server.url, "api_key": "EMPTY"},
        )
        with_file = [{"role": "user", "content": [{"text": "Files?"}, {"file": "manual.md"}]}]
        first = bot.run_nonstream(with_file)
        second = bot.run_nonstream([{"role": "user", "content": "Files?"}])
        bot.close_sync()
    assert json.loads(first[1]["content"]) == ["manual.md"]
    assert json.loads(second[1]["content"]) is None  # not the earlier run's files


def test_local_images_are_handed_to_file_tools_within_their_roots(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    picture = folders["cwd"] / "pic.png"
    picture.write_bytes(b"\x89PNG fake")
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(b"\x89PNG fake")
    steps = [tool_call("qwen_tools_test_recorder", {}), Reply(text="ok")]
    with OpenAIServer(steps) as server:
        bot = FnCallAgent(
            function_list=[Recorder({"work_dir": str(folders["work"])})],
            llm={"model_type": "qwenvl_oai", "model": "qwen-vl", "model_server": server.url},
        )
        content = [
            {"image": str(picture)},
            {"image": f"file://{outside}"},  # outside the tool's file_roots: not handed
            {"image": "https://images.test/remote.png"},  # remote: not downloaded
            {"text": "Which pictures?"},
            {"file": "manual.md"},
        ]
        response = bot.run_nonstream([{"role": "user", "content": content}])
        bot.close_sync()
    assert json.loads(response[1]["content"]) == ["manual.md", str(picture)]


def test_a_tool_handed_files_stays_idempotent(folders: dict[str, Path]) -> None:
    from parley.compat.qwen.tools.base import with_files  # noqa: PLC0415

    class Reading(Recorder):
        idempotent = True

    reading = Reading({"work_dir": str(folders["work"])})
    handed = with_files(reading, ["manual.md"])
    assert handed is not reading  # the stand-in that adds `files=`
    assert handed.idempotent is True
    assert (
        with_files(Recorder({"work_dir": str(folders["work"])}), ["manual.md"]).idempotent is False
    )
