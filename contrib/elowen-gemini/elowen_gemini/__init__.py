"""Gemini CLI (npm ``@google/gemini-cli``) as an Elowen executor provider."""
