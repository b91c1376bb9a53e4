"""Discord roles → Elowen projects.

Config (the plugin's ``roles`` and ``channel_projects``)::

    [plugins.discord.config.roles."111122223333444455"]   # a Discord role id
    projects = [1, 3]                                       # Elowen project ids
    prompt = "You help the design team."                    # optional role prompt

    [plugins.discord.config.channel_projects]
    "700000000000000001" = 3                                # a channel works on project 3

With ``roles`` empty the mapping is off: a linked sender has their account's projects, as on
the web. With it set, a sender's **effective scope** is the union of the projects of their
roles, intersected with their linked account's grants (an admin's grants: every project). A
guild message is answered only when that scope is not empty and, in a channel bound to a
project (``channel_projects``), only when that project is in it. A direct message carries no
roles: with the mapping on, only Elowen admins are answered in DMs. The adapter passes the
effective scope to the brain (``gateway.turn(..., projects=)``), so the turn's tools reach only
those projects; without a role map (or for an admin's DM) the turn is not narrowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RoleScope", "ScopeDecision"]


@dataclass(frozen=True, slots=True)
class ScopeDecision:
    """``allowed``; ``projects`` the effective scope (``None``: unrestricted); ``reason`` the
    sentence told to a refused sender; ``prompts`` the role prompts of the sender's roles."""

    allowed: bool
    projects: frozenset[int] | None
    reason: str = ""
    prompts: tuple[str, ...] = ()


def _ids(values: Any) -> frozenset[int]:
    out = set()
    for v in values if isinstance(values, (list, tuple)) else ():
        if isinstance(v, int) and not isinstance(v, bool):
            out.add(v)
        elif isinstance(v, str) and v.strip().isdigit():
            out.add(int(v))
    return frozenset(out)


class RoleScope:
    """The role map of one bot (see the module docstring).

    Raises:
        ValueError: a malformed ``roles`` or ``channel_projects`` value (the message names it).
    """

    def __init__(self, roles: Mapping[str, Any], channel_projects: Mapping[str, Any]) -> None:
        self.roles: dict[str, tuple[frozenset[int], str]] = {}
        for rid, spec in (roles or {}).items():
            if not str(rid).isdigit() or not isinstance(spec, Mapping):
                raise ValueError(f"roles.{rid}: expected a role id mapped to {{projects = [ids], prompt = '...'}}")
            self.roles[str(rid)] = (_ids(spec.get("projects", [])), str(spec.get("prompt") or ""))
        self.channels: dict[str, int] = {}
        for cid, pid in (channel_projects or {}).items():
            if not str(cid).isdigit() or not isinstance(pid, int) or isinstance(pid, bool):
                raise ValueError(f"channel_projects.{cid}: expected a channel id mapped to a project id")
            self.channels[str(cid)] = pid

    @property
    def enabled(self) -> bool:
        return bool(self.roles)

    def decide(self, *, role_ids: Iterable[str], channel_id: int, direct: bool, account: Mapping[str, Any] | None) -> ScopeDecision:
        """The effective scope of a sender holding ``role_ids`` in ``channel_id`` whose linked
        account is ``account`` (a users-service record: ``role``, ``projects``; ``None``: not
        readable, then only the role side counts and admins are not recognised)."""
        is_admin = bool(account) and account.get("role") == "admin"  # type: ignore[union-attr]
        grants: frozenset[int] | None = None if is_admin else _ids((account or {}).get("projects", []))
        bound = self.channels.get(str(channel_id))
        if not self.enabled:
            if bound is not None and grants is not None and bound not in grants:
                return ScopeDecision(False, grants, f"Your Elowen account has no access to project {bound}, which this channel works on.")
            return ScopeDecision(True, grants)
        if direct:
            if is_admin:
                return ScopeDecision(True, None)
            return ScopeDecision(False, frozenset(), "Direct messages are for Elowen admins here; write in a channel of the server instead.")
        held = [self.roles[r] for r in role_ids if r in self.roles]
        union = frozenset().union(*(p for p, _ in held)) if held else frozenset()
        effective = union if grants is None else union & grants
        prompts = tuple(t for _, t in held if t)
        if not effective:
            return ScopeDecision(False, effective, "Your Discord roles give you no Elowen project here.", prompts)
        if bound is not None and bound not in effective:
            return ScopeDecision(False, effective, f"Your Discord roles do not include project {bound}, which this channel works on.", prompts)
        return ScopeDecision(True, effective, "", prompts)
