"""The providers' old module paths keep working for one release, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

from parley import _moved
from tests._process import run_python


def test_an_old_path_is_the_new_module_with_a_warning_naming_it() -> None:
    from parley.providers.openai.chat import OpenAIChatModel  # noqa: PLC0415

    sys.modules.pop("parley.models.openai.chat", None)
    # The old package warns too (it is imported first); both name their new paths.
    with pytest.warns(DeprecationWarning, match=r"moved to parley\.providers\.openai") as caught:
        old = importlib.import_module("parley.models.openai.chat")
    assert old is importlib.import_module("parley.providers.openai.chat")
    assert old.OpenAIChatModel is OpenAIChatModel
    # The warning points at the code that imported, not at importlib's frames.
    assert any("parley.providers.openai.chat" in str(w.message) for w in caught)
    assert {w.filename for w in caught} == {__file__}, [w.filename for w in caught]


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_every_old_path_names_a_module_that_exists(old: str) -> None:
    new = _moved.new_name(old)
    assert new is not None
    assert importlib.util.find_spec(new) is not None, f"{old} points at {new}, which is missing"


def test_the_names_users_imported_from_old_packages_still_import() -> None:
    # Each line is how a user of 0.1 imported it; a fresh interpreter, so nothing is cached.
    code = "\n".join(
        [
            "import warnings",
            "warnings.simplefilter('error')",
            "warnings.filterwarnings('default', category=DeprecationWarning, module='__main__')",
            "from parley.models.openai import OpenAIChatModel, OpenAICredential",
            "from parley.embeddings.openai import OpenAIEmbeddingModel",
            "from parley.tts.openai import OpenAITTSModel",
            "from parley.testing.openai_server import OpenAIServer",
            "from parley.models.local import LocalChatModel",
            "import parley.models.anthropic.chat as chat",
            "from parley.providers.openai import OpenAIChatModel as new",
            "assert OpenAIChatModel is new",
            "assert chat.__name__ == 'parley.providers.anthropic.chat'",
        ]
    )
    done = run_python(code)
    # One warning per old module, each naming the new path (stderr, the default filter).
    assert "parley.models.openai moved to parley.providers.openai" in done.stderr
    assert "parley.testing.openai_server moved to parley.providers.openai.server" in done.stderr
    assert "parley.tts.openai moved to parley.providers.openai.speech" in done.stderr


def test_a_path_that_never_existed_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("parley.models.nonexistent")
    assert _moved.new_name("parley.models.openaix") is None
    assert _moved.new_name("parley.models.base") is None


def test_the_bases_import_no_provider() -> None:
    # A fresh interpreter: the bases, and the test doubles by name, load no provider's package.
    code = (
        "import sys, parley.models, parley.embeddings, parley.tts, parley.testing\n"
        "print(sorted(m for m in sys.modules if m.startswith('parley.providers.')))"
    )
    done = run_python(code)
    assert done.stdout.strip() == "[]"


def test_an_old_import_leaves_the_new_module_its_own_spec_and_reload_runs_it() -> None:
    # A fresh interpreter: the new module is first imported by its old path's alias.
    code = "\n".join(
        [
            "import importlib, importlib.util, warnings",
            "warnings.simplefilter('ignore', DeprecationWarning)",
            "import parley.models.openai.chat",
            "import parley.providers.openai.chat as chat",
            "import parley.providers.openai as package",
            "assert chat.__spec__.name == 'parley.providers.openai.chat', chat.__spec__.name",
            "assert not hasattr(chat, '__path__'), 'a plain module passes for a package'",
            "assert package.__spec__.name == 'parley.providers.openai', package.__spec__.name",
            "assert package.__path__, 'the package lost its path'",
            "spec = importlib.util.find_spec('parley.providers.openai.chat')",
            "assert spec is not None and spec.name == 'parley.providers.openai.chat', spec",
            "before = chat.OpenAIChatModel",
            "importlib.reload(chat)",
            "assert chat.OpenAIChatModel is not before, 'reload ran nothing'",
            "assert chat.__name__ == 'parley.providers.openai.chat'",
            "import parley.models.openai.formatter as old_formatter",
            "assert old_formatter.__name__ == 'parley.providers.openai.formatter'",
        ]
    )
    run_python(code)
