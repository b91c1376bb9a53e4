"""Elowen: a self-hosted personal AI agent (kernel, daemon, web and CLI hosts)."""

__version__ = "0.1.0"
