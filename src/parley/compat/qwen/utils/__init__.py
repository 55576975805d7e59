"""Qwen-Agent's helpers (`qwen_agent.utils`) that its examples and agents import.

`output_beautify.typewriter_print` prints a streamed response as it grows; `utils` holds the
message and file helpers (`format_as_text_message`, `save_url_to_local_work_dir`, ...).
"""
