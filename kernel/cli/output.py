"""Human and machine output: aligned tables, key/value blocks, JSON.

Everything goes to stdout through :func:`click.echo`; diagnostics go to stderr through
:func:`note`. JSON output is exactly the API's objects (no reshaping), indented, one document
per command.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

__all__ = ["Column", "cell", "echo_json", "fields", "note", "table"]

Column = tuple[str, str | Callable[[dict[str, Any]], Any]]
"""A table column: its header and either a key of the row or a function of the row."""


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON (keys kept in the API's order)."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def note(message: str) -> None:
    """A progress or hint line on stderr (never mixed into JSON on stdout)."""
    click.echo(message, err=True)


def cell(value: Any) -> str:
    """One value as table text: ``-`` for empty, lists joined by commas, JSON for mappings."""
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value).replace("\n", " ")


def table(rows: Iterable[dict[str, Any]], columns: Sequence[Column], *, empty: str = "(none)") -> None:
    """Print ``rows`` as a table with a header line, columns padded to their widest cell; the
    last column is not padded. Prints ``empty`` when there are no rows."""
    grid = [[cell(col(row) if callable(col) else row.get(col)) for _, col in columns] for row in rows]
    if not grid:
        click.echo(empty)
        return
    headers = [h for h, _ in columns]
    widths = [max(len(r[i]) for r in [headers, *grid]) for i in range(len(headers))]
    for line in [headers, *grid]:
        click.echo("  ".join(v.ljust(w) for v, w in zip(line[:-1], widths[:-1])) + ("  " if len(line) > 1 else "") + line[-1])


def fields(record: dict[str, Any], keys: Sequence[str] | None = None) -> None:
    """Print ``key: value`` lines for ``keys`` of ``record`` (all keys if ``None``), aligned."""
    keys = list(record) if keys is None else [k for k in keys if k in record]
    if not keys:
        return
    width = max(len(k) for k in keys) + 1
    for key in keys:
        value = record[key]
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value) and any(len(v) > 40 for v in value):
            click.echo(f"{key + ':':<{width}}")
            for item in value:
                click.echo(f"  - {item}")
        else:
            click.echo(f"{key + ':':<{width}} {cell(value)}")
