# ruff: noqa: E501  (templates are data: their lines are as jinja needs them)
"""Minimal chat templates in each tool-calling family's documented format, written for these tests.

They follow the families' published conventions (the markers, roles and where the tools go)
and nothing more; they are not the publishers' templates. Each renders with the shipped
SmolLM2 model's vocabulary too (its special tokens are ChatML's; other families' markers
are then plain text), which is what lets the end-to-end tests run every format on it.
"""

from __future__ import annotations

HERMES = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}You may call functions. Their signatures:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Call one by writing <tool_call>
{"name": <function name>, "arguments": <arguments object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.role == 'assistant' %}<|im_start|>assistant
{% if m.content %}{{ m.content }}
{% endif %}
{%- for c in m.tool_calls or [] %}<tool_call>
{"name": {{ c.function.name | tojson }}, "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% if not loop.last %}{{ "\\n" }}{% endif %}
{%- endfor %}<|im_end|>
{% elif m.role != 'system' %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

LLAMA3 = """\
{{- bos_token }}
{%- if messages[0].role == 'system' %}<|start_header_id|>system<|end_header_id|>

Environment: ipython
{{ messages[0].content }}<|eot_id|>
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'user' and tools and loop.first or m.role == 'user' and tools and loop.index0 == 1 and messages[0].role == 'system' %}<|start_header_id|>user<|end_header_id|>

Answer with a JSON function call, {"name": function name, "parameters": arguments}, when a function helps:
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}
{{ m.content }}<|eot_id|>
{%- elif m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>

{{ m.content }}<|eot_id|>
{%- elif m.role == 'assistant' and m.tool_calls %}<|start_header_id|>assistant<|end_header_id|>

{% for c in m.tool_calls %}{"name": {{ c.function.name | tojson }}, "parameters": {{ c.function.arguments | tojson }}}{% endfor %}<|eot_id|>
{%- elif m.role != 'system' %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content }}<|eot_id|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""

PHI4 = """\
{%- for m in messages %}
{%- if m.role == 'system' and m.tools %}<|system|>{{ m.content }}<|tool|>{{ m.tools }}<|/tool|><|end|>
{%- else %}<|{{ m.role }}|>{{ m.content }}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|>{% endif %}"""

GEMMA = """\
{{- bos_token }}
{%- set ns = namespace(system='') %}
{%- if messages[0].role == 'system' %}{% set ns.system = messages[0].content + '\n\n' %}{% endif %}
{%- for m in messages if m.role != 'system' %}
{%- if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('turns must alternate user/model') }}{% endif %}
<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}
{% if loop.first %}{{ ns.system }}{% endif %}{{ m.content }}<end_of_turn>
{%- endfor %}
{%- if add_generation_prompt %}
<start_of_turn>model
{% endif %}"""

TEMPLATES = {"hermes": HERMES, "llama3": LLAMA3, "phi4": PHI4, "gemma": GEMMA}
