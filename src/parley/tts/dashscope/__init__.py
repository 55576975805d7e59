"""DashScope (Model Studio) speech synthesis."""
