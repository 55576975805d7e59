"""The real servers of tests/_external.py answer: PostgreSQL through SQLAlchemy, and Chromium.

Also that the session's sync browser and the suite's async tests run side by side (Playwright's
sync API otherwise leaves its loop marked as running, which breaks every later asyncio test).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Browser, Page
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests._external import fresh_database
from tests._http import serving


async def _scalar(url: str, sql: str) -> object:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            return (await connection.execute(text(sql))).scalar()
    finally:
        await engine.dispose()


async def test_postgres_answers_through_sqlalchemy_and_asyncpg(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql+asyncpg://")
    version = await _scalar(postgres_url, "SELECT version()")
    assert isinstance(version, str)
    assert version.startswith("PostgreSQL ")


@pytest.fixture
def second_db_url(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


async def test_each_test_database_is_fresh_and_separate(
    postgres_db_url: str, second_db_url: str
) -> None:
    assert postgres_db_url != second_db_url
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
    assert await _scalar(postgres_db_url, tables) == 0
    assert await _scalar(second_db_url, tables) == 0

    engine = create_async_engine(postgres_db_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE note (body text)"))
            await connection.execute(text("INSERT INTO note VALUES ('only here')"))
    finally:
        await engine.dispose()

    assert await _scalar(postgres_db_url, "SELECT body FROM note") == "only here"
    assert await _scalar(postgres_db_url, tables) == 1
    assert await _scalar(second_db_url, "SELECT to_regclass('note') IS NULL") is True
    assert await _scalar(second_db_url, tables) == 0


async def test_a_fresh_database_is_dropped_after_use(postgres_url: str) -> None:
    with fresh_database(postgres_url) as url:
        name = url.rsplit("/", 1)[1]
        # An open connection must not keep the database alive (DROP ... WITH (FORCE)).
        engine = create_async_engine(url)
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    await engine.dispose()
    exists = f"SELECT count(*) FROM pg_database WHERE datname = '{name}'"
    assert await _scalar(postgres_url, exists) == 0


def test_chromium_runs_a_pages_script(chromium_page: Page) -> None:
    chromium_page.set_content(
        "<p id='out'>not yet</p>"
        "<script>document.getElementById('out').textContent ="
        " [1, 2, 3].map(x => x * 2).join(',')</script>"
    )
    assert chromium_page.text_content("#out") == "2,4,6"


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>t</title><h1 id='hi'>served on 127.0.0.1</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_chromium_loads_a_page_from_a_server_in_a_thread(chromium_page: Page) -> None:
    # How the web page's tests run: a live server in a background thread, the browser in this one.
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Hello)) as url:
        chromium_page.goto(f"{url}/")
        assert chromium_page.locator("#hi").inner_text() == "served on 127.0.0.1"


def test_pages_do_not_share_storage(chromium_browser: Browser, chromium_page: Page) -> None:
    chromium_page.context.add_cookies([{"name": "a", "value": "1", "url": "http://127.0.0.1/"}])
    assert [c["name"] for c in chromium_page.context.cookies()] == ["a"]
    other = chromium_browser.new_context()
    try:
        assert other.cookies() == []
    finally:
        other.close()


def test_asyncio_run_works_after_the_browser_was_used(chromium_browser: Browser) -> None:
    assert chromium_browser.is_connected()
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"


async def test_async_tests_run_beside_the_sync_browser(
    chromium_browser: Browser, postgres_db_url: str
) -> None:
    await asyncio.sleep(0)
    assert await _scalar(postgres_db_url, "SELECT 41 + 1") == 42
