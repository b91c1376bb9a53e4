"""Elowen's prompt templates, as files (import package ``elowen.prompts``).

``load("overseer")`` returns the text of ``overseer.md``. The files ship inside the wheel, so
an installed Elowen finds them the same way as a checkout.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["load"]


@cache
def load(name: str) -> str:
    """The text of the prompt template ``<name>.md``.

    Raises:
        FileNotFoundError: there is no such template.
    """
    if not name.replace("_", "").replace("-", "").isalnum():
        raise FileNotFoundError(f"no prompt template {name!r}")
    return resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
