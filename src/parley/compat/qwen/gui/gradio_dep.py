"""Qwen-Agent's `gui.gradio_dep` (Gradio and ModelScope Studio's widgets): not in parley.

Importing it raises `ImportError` saying why, as Qwen-Agent's does without its `gui` extra:
parley's web page is `parley serve` (see `parley.compat.qwen.gui`).
"""

raise ImportError(
    "parley.compat.qwen.gui.gradio_dep: parley has no Gradio UI (gr, mgr, ms are Qwen-Agent's "
    "Gradio widgets); parley's web page is `parley serve`, and the agents run without a page "
    "through `bot.run(messages)`"
)
