"""A Qwen-style tool's content items become blocks in `parley.tools`, below `parley.compat`."""

from __future__ import annotations

from parley.messages import ImageBlock, TextBlock
from parley.tools.base import to_output
from tests._process import run_python


class Item:
    """Qwen-Agent's `ContentItem` as far as tools read it: `get_type_and_value()`."""

    def __init__(self, kind: str, value: str) -> None:
        self.kind, self.value = kind, value

    def get_type_and_value(self) -> tuple[str, str]:
        return self.kind, self.value


def test_items_of_qwen_agents_shape_become_blocks() -> None:
    # Qwen-Agent's own ContentItem (not parley.compat.qwen's) has this shape too.
    out = to_output([Item("text", "a cat:"), Item("image", "https://x.test/cat.png")])
    assert isinstance(out, list)
    assert out[0] == TextBlock(text="a cat:")
    assert isinstance(out[1], ImageBlock)
    assert out[1].source.url == "https://x.test/cat.png"  # type: ignore[union-attr]


def test_a_list_of_other_objects_stays_data() -> None:
    assert (
        to_output([{"image": "https://x.test/cat.png"}]) == '[{"image": "https://x.test/cat.png"}]'
    )


def test_reading_a_tools_items_loads_nothing_of_compat() -> None:
    # tools sit below compat (docs/architecture.md, "Layout"): turning a Qwen-style tool's
    # answer into blocks must not import parley.compat, lazily or otherwise.
    script = (
        "import sys\n"
        "from parley.tools.base import to_output\n"
        "class Item:\n"
        "    def get_type_and_value(self):\n"
        "        return 'text', 'hi'\n"
        "to_output([Item()])\n"
        "print(sorted(m for m in sys.modules if m.startswith('parley.compat')))\n"
    )
    done = run_python(script, timeout=60)
    assert done.stdout.strip() == "[]"
