"""The ``agents`` plugin: coding-agent CLIs in tmux (screen classifier, provider base, …)."""
