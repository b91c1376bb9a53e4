"""The plugin manifest ``elowen-plugin.toml``: schema, parser, capability grammar.

A manifest ships inside the plugin's import package, next to its ``__init__.py``, and is read
without importing the plugin's code. Example::

    name = "hello"
    version = "0.1.0"
    api = "1"
    entry = "elowen_hello.plugin"
    description = "Says hello."

    [capabilities]
    required = ["hook.mutate:turn_context"]
    optional = ["fs.read:$PLUGIN_DATA"]

    [contributes]
    tools = ["hello.greet"]
    commands = ["hello"]
    hooks = ["on_event", "turn_context"]

    [config.greeting]
    type = "string"
    default = "Hello"
    description = "What the tool says."

Capabilities (``name`` or ``name:argument``):

=====================  ==============================================================
``fs.read:<root>``     read files under ``<root>`` through the path guard
``fs.write:<root>``    read and write files under ``<root>``
``net:<host>``         talk to ``<host>`` (``*`` for any)
``store``              use the SQLite store (own tables through its ``schema.sql``)
``events.publish``     publish events on the event bus
``hook.mutate:<t>``    have patches applied for mutating hook target ``<t>``
``process.spawn``      start processes (tmux sessions, subprocesses)
``service:<name>``     use another plugin's service ``<name>``
``inference``          call the LLM relay
``settings.write``     change ``config.toml`` through ``ctx.update_settings``
=====================  ==============================================================

``<root>`` may start with ``$PLUGIN_DATA`` (the plugin's data folder), ``$ELOWEN_HOME``,
``$PROJECTS`` (the folders of registered projects) or ``~``.
"""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, ManifestError
from .hookspecs import API_VERSION, HOOK_KINDS, MUTATING_TARGETS

MANIFEST_NAME = "elowen-plugin.toml"

SUPPORTED_APIS = frozenset({API_VERSION})

CAPABILITY_NAMES: dict[str, bool] = {
    # name → takes an argument
    "fs.read": True,
    "fs.write": True,
    "net": True,
    "store": False,
    "events.publish": False,
    "hook.mutate": True,
    "process.spawn": False,
    "service": True,
    "inference": False,
    "settings.write": False,
}

CONTRIBUTION_FIELDS = ("tools", "commands", "skills", "hooks", "platforms", "executors", "prompt_fragments", "loops", "routes", "services", "decision_paths")

KIND_FIELDS: dict[str, str] = {
    "tool": "tools",
    "command": "commands",
    "skill": "skills",
    "prompt_fragment": "prompt_fragments",
    "platform": "platforms",
    "executor": "executors",
    "loop": "loops",
    "route": "routes",
    "service": "services",
    "decision_path": "decision_paths",
}
"""Contribution kind (as registered) → the ``[contributes]`` field that must declare it."""

_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+([.+-][0-9A-Za-z.+-]+)?$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CONFIG_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def parse_capability(cap: str) -> tuple[str, str | None]:
    """Split ``"fs.read:/srv"`` into ``("fs.read", "/srv")``.

    Raises:
        ManifestError: unknown name, a missing or unexpected argument, or a NUL byte.
    """
    if not isinstance(cap, str) or not cap or "\x00" in cap:
        raise ManifestError(f"bad capability {cap!r}")
    name, sep, arg = cap.partition(":")
    if name not in CAPABILITY_NAMES:
        raise ManifestError(f"unknown capability {name!r} in {cap!r}; known: {', '.join(sorted(CAPABILITY_NAMES))}")
    takes_arg = CAPABILITY_NAMES[name]
    if takes_arg and not arg:
        raise ManifestError(f"capability {name!r} needs an argument, e.g. {name}:<value>")
    if not takes_arg and sep:
        raise ManifestError(f"capability {name!r} takes no argument")
    return name, (arg or None)


@dataclass(frozen=True, slots=True)
class ConfigField:
    """One key of a plugin's config schema."""

    key: str
    type: str
    default: Any = None
    description: str = ""
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None

    def validate(self, value: Any) -> Any:
        """Return ``value`` checked (and coerced from a string where unambiguous).

        Raises:
            ConfigError: wrong type, out of range, not finite (``inf``, ``nan``, ``1e309``), or
                not one of ``choices``.
        """
        value = self._coerce(value)
        py = _CONFIG_TYPES[self.type]
        if self.type in ("integer", "number") and isinstance(value, bool):
            raise ConfigError(f"{self.key}: expected {self.type}, got boolean")
        matches = isinstance(value, py)  # not narrowed: py is a runtime table entry
        if not matches:
            raise ConfigError(f"{self.key}: expected {self.type}, got {type(value).__name__}")
        if self.type == "number" and not math.isfinite(value):
            raise ConfigError(f"{self.key}: {value!r} is not a finite number")
        if self.choices and value not in self.choices:
            raise ConfigError(f"{self.key}: {value!r} is not one of {list(self.choices)}")
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(f"{self.key}: {value!r} is below the minimum {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{self.key}: {value!r} is above the maximum {self.maximum}")
        return value

    def _coerce(self, value: Any) -> Any:
        if not isinstance(value, str) or self.type == "string":
            return value
        text = value.strip()
        try:
            if self.type == "integer":
                return int(text)
            if self.type == "number":
                return float(text)
        except ValueError:
            raise ConfigError(f"{self.key}: {value!r} is not {'an' if self.type[0] in 'aeiou' else 'a'} {self.type}") from None
        if self.type == "boolean":
            low = text.lower()
            if low in ("true", "yes", "on", "1"):
                return True
            if low in ("false", "no", "off", "0"):
                return False
            raise ConfigError(f"{self.key}: {value!r} is not a boolean (true/false)")
        return value


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed, validated ``elowen-plugin.toml``."""

    name: str
    version: str
    api: str
    entry: str
    description: str = ""
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    contributes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    config: Mapping[str, ConfigField] = field(default_factory=dict)
    path: Path | None = None

    @property
    def capabilities(self) -> tuple[str, ...]:
        """Required then optional capabilities."""
        return self.required + self.optional

    def declares(self, kind: str, name: str) -> bool:
        """Whether ``[contributes]`` declares the contribution ``name`` of ``kind`` (a key of
        :data:`KIND_FIELDS`). Entries may be shell-style patterns (``"brain.*"``). A route is
        named ``"METHOD /path"`` (``"WS /path"`` for a websocket); an entry without a method
        (``"/brain/*"``) matches the path for any method. An unknown kind is never declared."""
        field_name = KIND_FIELDS.get(kind)
        if field_name is None:
            return False
        for entry in self.contributes.get(field_name, ()):
            if kind == "route" and entry.startswith("/"):
                if fnmatch.fnmatchcase(name.partition(" ")[2], entry):
                    return True
            elif fnmatch.fnmatchcase(name, entry):
                return True
        return False

    def warnings(self) -> list[str]:
        """Problems that do not make the manifest invalid but will bite at run time, one
        sentence each: a mutating hook (:data:`~elowen_sdk.hookspecs.MUTATING_TARGETS`) listed
        in ``contributes.hooks`` without its ``hook.mutate:<target>`` capability declared."""
        out = []
        for hook in self.contributes.get("hooks", ()):
            target = MUTATING_TARGETS.get(hook)
            if target is not None and f"hook.mutate:{target}" not in self.capabilities:
                out.append(f"implements mutating hook {hook} but does not declare hook.mutate:{target}: its patches will be dropped")
        return out

    def config_defaults(self) -> dict[str, Any]:
        """The config schema's defaults as a dict."""
        return {k: f.default for k, f in self.config.items()}

    def validate_config(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with ``values``, each validated.

        Raises:
            ConfigError: an unknown key or an invalid value.
        """
        out = self.config_defaults()
        for key, value in values.items():
            fld = self.config.get(key)
            if fld is None:
                raise ConfigError(f"plugin {self.name!r} has no config key {key!r}; known: {', '.join(sorted(self.config)) or '(none)'}")
            out[key] = fld.validate(value)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (for ``elowen plugin info`` and the API)."""
        return {
            "name": self.name,
            "version": self.version,
            "api": self.api,
            "entry": self.entry,
            "description": self.description,
            "capabilities": {"required": list(self.required), "optional": list(self.optional)},
            "contributes": {k: list(v) for k, v in self.contributes.items()},
            "config": {
                k: {"type": f.type, "default": f.default, "description": f.description, **({"choices": list(f.choices)} if f.choices else {})}
                for k, f in self.config.items()
            },
        }


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest file.

    Raises:
        ManifestError: the file is missing, not TOML, or does not match the schema.
    """
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"no {MANIFEST_NAME} at {p}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{p}: {exc}") from None
    return parse_manifest(raw, path=p)


def parse_manifest(raw: Mapping[str, Any], path: Path | None = None) -> Manifest:
    """Validate a manifest already parsed from TOML.

    Raises:
        ManifestError: a field is missing or of the wrong shape; the message names it.
    """
    where = f"{path}: " if path else ""

    def fail(msg: str) -> ManifestError:
        return ManifestError(where + msg)

    def req_str(key: str, pattern: re.Pattern[str] | None = None) -> str:
        val = raw.get(key)
        if not isinstance(val, str) or not val:
            raise fail(f"'{key}' is required and must be a string")
        if pattern and not pattern.match(val):
            raise fail(f"'{key}' = {val!r} is not valid")
        return val

    name = req_str("name", _NAME_RE)
    version = req_str("version", _VERSION_RE)
    api = str(raw.get("api", ""))
    if api not in SUPPORTED_APIS:
        raise fail(f"plugin API {api!r} is not supported (supported: {', '.join(sorted(SUPPORTED_APIS))})")
    entry = req_str("entry", _MODULE_RE)
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise fail("'description' must be a string")

    caps = raw.get("capabilities", {})
    if not isinstance(caps, Mapping):
        raise fail("[capabilities] must be a table")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("required", "optional"):
        val = caps.get(key, [])
        if not isinstance(val, list):
            raise fail(f"capabilities.{key} must be a list of strings")
        for cap in val:
            try:
                parse_capability(cap)
            except ManifestError as exc:
                raise fail(str(exc)) from None
        lists[key] = tuple(val)

    contributes_raw = raw.get("contributes", {})
    if not isinstance(contributes_raw, Mapping):
        raise fail("[contributes] must be a table")
    contributes: dict[str, tuple[str, ...]] = {}
    for key, val in contributes_raw.items():
        if key not in CONTRIBUTION_FIELDS:
            raise fail(f"contributes.{key} is unknown; known: {', '.join(CONTRIBUTION_FIELDS)}")
        if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
            raise fail(f"contributes.{key} must be a list of strings")
        if key == "hooks":
            unknown = [h for h in val if h not in HOOK_KINDS]
            if unknown:
                raise fail(f"contributes.hooks names unknown hooks: {unknown}")
        contributes[key] = tuple(val)

    config_raw = raw.get("config", {})
    if not isinstance(config_raw, Mapping):
        raise fail("[config] must be a table of tables")
    config: dict[str, ConfigField] = {}
    for key, spec in config_raw.items():
        if not isinstance(spec, Mapping):
            raise fail(f"config.{key} must be a table with 'type' and 'default'")
        typ = spec.get("type")
        if typ not in _CONFIG_TYPES:
            raise fail(f"config.{key}.type must be one of {sorted(_CONFIG_TYPES)}")
        choices = spec.get("choices", [])
        if not isinstance(choices, list):
            raise fail(f"config.{key}.choices must be a list")
        fld = ConfigField(
            key=key,
            type=typ,
            default=spec.get("default"),
            description=str(spec.get("description", "")),
            choices=tuple(choices),
            minimum=spec.get("minimum"),
            maximum=spec.get("maximum"),
        )
        if fld.default is not None:
            try:
                fld.validate(fld.default)
            except ConfigError as exc:
                raise fail(f"config default invalid: {exc}") from None
        config[key] = fld

    return Manifest(
        name=name,
        version=version,
        api=api,
        entry=entry,
        description=description,
        required=lists["required"],
        optional=lists["optional"],
        contributes=contributes,
        config=config,
        path=path,
    )
