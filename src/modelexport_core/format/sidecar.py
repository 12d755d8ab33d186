"""The JSON sidecar ``OUTPUT.hierarchy.json``: schema ``modelexport/hierarchy@1``.

The schema is documented in docs/sidecar.md; :func:`validate_sidecar` checks a document
against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = "modelexport/hierarchy@1"


@dataclass(frozen=True)
class Attempt:
    """One strategy tried during an export.

    ``reason`` is one line; ``detail`` the exporter's whole message (shown with
    ``--verbose``); ``max_abs_diff`` the difference verification measured, where it ran.
    ``seconds`` is reported to the caller but kept out of the sidecar, so that two
    exports of one model give identical files.
    """

    strategy: str
    status: str  # "ok", "failed" or "unavailable"
    reason: str = ""
    detail: str = ""
    max_abs_diff: float | None = None
    seconds: float = 0.0
    static: bool = False  # made in the chain's last resort, every axis static at the user's example

    @property
    def label(self) -> str:
        """The strategy's name, marked ``(static)`` for an attempt of the static last resort."""
        return f"{self.strategy} (static)" if self.static else self.strategy

    def record(self) -> dict[str, Any]:
        """The sidecar's entry for this attempt."""
        entry: dict[str, Any] = {"strategy": self.strategy, "status": self.status, "reason": self.reason}
        if self.static:
            entry["static"] = True
        if self.detail:
            entry["detail"] = self.detail
        if self.max_abs_diff is not None:
            entry["max_abs_diff"] = self.max_abs_diff if self.max_abs_diff != float("inf") else "inf"
        return entry


def sidecar_path(onnx_path: Path) -> Path:
    """``model.onnx`` -> ``model.hierarchy.json`` in the same folder."""
    return onnx_path.with_name(onnx_path.stem + ".hierarchy.json")


def build_sidecar(
    *,
    strategy: str,
    attempts: list[Attempt],
    model_info: dict[str, Any],
    modules: dict[str, dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    export_info: dict[str, Any],
    details: dict[str, Any],
) -> dict[str, Any]:
    """The sidecar document, keys in schema order."""
    return {
        "schema": SCHEMA,
        "strategy": strategy,
        "attempted": [attempt.record() for attempt in attempts],
        "model": model_info,
        "export": export_info,
        "modules": modules,
        "nodes": nodes,
        "details": details,
    }


_ONE_LINE_EACH = ("modules", "nodes")
"""Sections written one entry per line: readable, greppable, and fast (json's C encoder works only unindented)."""


def dumps_sidecar(document: dict[str, Any]) -> str:
    """The document as JSON text: indented, with each module and each node on a line of its own."""
    parts = []
    for key, value in document.items():
        if key in _ONE_LINE_EACH and isinstance(value, dict) and value:
            # one call of the C encoder, then a line break after each entry: an entry's object ends in
            # '}' and the next key starts with '"'; inside a string a quote is always escaped, so '}, "'
            # occurs only between entries (and extra whitespace between tokens is valid JSON anyway)
            body = json.dumps(value)[1:-1].replace('}, "', '},\n  "')
            parts.append(f" {json.dumps(key)}: {{\n  {body}\n }}")
        else:
            parts.append(f" {json.dumps(key)}: " + json.dumps(value, indent=1).replace("\n", "\n "))
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_sidecar(document: dict[str, Any], path: Path) -> None:
    path.write_text(dumps_sidecar(document))


def validate_sidecar(document: Any, node_names: list[str] | None = None) -> list[str]:
    """Problems with a sidecar document; empty when it follows the schema.

    With ``node_names`` (the graph's nodes), also checks that every node is present.
    """
    problems: list[str] = []

    def expect(condition: bool, message: str) -> None:
        if not condition:
            problems.append(message)

    if not isinstance(document, dict):
        return ["the sidecar is not a JSON object"]
    expect(document.get("schema") == SCHEMA, f"schema is {document.get('schema')!r}, expected {SCHEMA!r}")
    expect(isinstance(document.get("strategy"), str) and bool(document.get("strategy")), "strategy must be a name")
    attempted = document.get("attempted")
    expect(isinstance(attempted, list) and bool(attempted), "attempted must be a non-empty list")
    for attempt in attempted or []:
        expect(
            isinstance(attempt, dict) and {"strategy", "status", "reason"} <= set(attempt)
            and attempt.get("status") in {"ok", "failed", "unavailable"},
            f"bad attempt entry {attempt!r}",
        )
    if isinstance(attempted, list) and attempted:
        last_ok = [a for a in attempted if isinstance(a, dict) and a.get("status") == "ok"]
        expect(len(last_ok) == 1 and last_ok[0].get("strategy") == document.get("strategy"),
               "exactly one attempt succeeds, and it is the strategy recorded")
    model = document.get("model")
    expect(isinstance(model, dict) and isinstance(model.get("class"), str), "model.class must be a string")
    modules = document.get("modules")
    expect(isinstance(modules, dict) and "" in (modules or {}), "modules must be an object with the root ''")
    for qualname, entry in (modules or {}).items():
        ok = isinstance(entry, dict) and isinstance(entry.get("tag"), str) and entry["tag"].startswith("/")
        expect(ok and isinstance(entry.get("class"), str), f"module {qualname!r} needs a tag and a class")
    nodes = document.get("nodes")
    expect(isinstance(nodes, dict) and bool(nodes), "nodes must be a non-empty object")
    for name, entry in (nodes or {}).items():
        ok = isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("tag", "module", "op_type"))
        if not ok:
            problems.append(f"node {name!r} needs tag, module and op_type strings")
            continue
        expect(entry["tag"].startswith("/"), f"node {name!r} has a malformed tag {entry['tag']!r}")
        if isinstance(modules, dict):
            expect(entry["module"] in modules and modules[entry["module"]]["tag"] == entry["tag"],
                   f"node {name!r}: module {entry['module']!r} does not carry tag {entry['tag']!r}")
    if node_names is not None and isinstance(nodes, dict):
        missing = [n for n in node_names if n not in nodes]
        expect(not missing, f"{len(missing)} graph nodes are missing from the sidecar (first: {missing[:3]})")
    return problems
