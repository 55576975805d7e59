"""Conversions between parley's `Msg` and other frameworks' message formats."""
