"""The hierarchy-tag builder shared by every strategy.

A tag is ``/`` followed by the class names of a module's kept ancestors and of the
module itself, root first: ``/BertModel/BertEncoder/BertLayer.0/BertAttention``.

Rules, all derived from the module tree:

- Modules whose class lives in ``torch`` (``torch.nn`` containers and layers) are left
  out unless ``keep_torch_modules``; what they produce belongs to their nearest kept
  ancestor. The root is always kept.
- A segment is ``ClassName``. When the module's name below its kept parent ends in an
  index (a ModuleList or Sequential element) the index follows: ``BertLayer.0``.
- When two kept children of one kept parent would still get the same segment (two
  ``RMSNorm`` attributes ``q_norm`` and ``k_norm``, or two ModuleLists each holding a
  ``Block.0``), each of them gets its full dotted name below the kept parent instead:
  ``RMSNorm.q_norm``, ``Block.encoder.0``. So two distinct modules never share a tag.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ModuleRecord:
    """One module of the user's model as the tag builder sees it."""

    qualname: str
    class_name: str
    class_module: str  # the Python module that defines the class

    @property
    def is_torch_module(self) -> bool:
        return self.class_module == "torch" or self.class_module.startswith("torch.")


def parent_qualname(qualname: str) -> str | None:
    """The qualified name of a module's parent; None for the root."""
    if qualname == "":
        return None
    return qualname.rpartition(".")[0]


def is_ancestor(ancestor: str, qualname: str) -> bool:
    """True when ``ancestor`` is ``qualname`` or one of its ancestors."""
    return ancestor == "" or qualname == ancestor or qualname.startswith(ancestor + ".")


def in_sibling_elements(first: str, second: str) -> bool:
    """Whether two modules lie in two elements of one list of layers: at the first atom where their names differ,
    both are indices (``layers.1.mlp`` against ``layers.2``). A node of one tagged with the other is the
    cross-layer contamination tags exist to end."""
    for a, b in zip(first.split("."), second.split(".")):
        if a != b:
            return a.isdigit() and b.isdigit()
    return False


def in_list_element(qualname: str) -> bool:
    """Whether a module lies in an element of a list of layers (an atom of its name is an index): a module in
    another element of that list lies in a sibling element (:func:`in_sibling_elements`)."""
    return any(atom.isdigit() for atom in qualname.split("."))


def common_ancestor(qualnames: Iterable[str]) -> str:
    """The deepest module that is an ancestor of (or equal to) every given module."""
    names = list(qualnames)
    if not names:
        return ""
    parts = names[0].split(".") if names[0] else []
    for name in names[1:]:
        other = name.split(".") if name else []
        keep = 0
        while keep < len(parts) and keep < len(other) and parts[keep] == other[keep]:
            keep += 1
        parts = parts[:keep]
    return ".".join(parts)


def records_from_model(model: "torch.nn.Module") -> list[ModuleRecord]:
    """Describe each module instance of ``model`` once, by its first name."""
    return [
        ModuleRecord(qualname, type(module).__name__, type(module).__module__)
        for qualname, module in model.named_modules()
    ]


class HierarchyTags:
    """Tags for every module of one model, and the mapping of any module to its kept one."""

    def __init__(self, records: Iterable[ModuleRecord], keep_torch_modules: bool = False):
        self.records: dict[str, ModuleRecord] = {r.qualname: r for r in records}
        if "" not in self.records:
            raise ValueError("the module records have no root (qualified name '')")
        self.keep_torch_modules = keep_torch_modules
        self._kept_of: dict[str, str] = {}
        self._tags: dict[str, str] = {}
        self._build()

    @classmethod
    def from_model(cls, model: "torch.nn.Module", keep_torch_modules: bool = False) -> "HierarchyTags":
        return cls(records_from_model(model), keep_torch_modules)

    def _is_kept(self, record: ModuleRecord) -> bool:
        return record.qualname == "" or self.keep_torch_modules or not record.is_torch_module

    def _build(self) -> None:
        # Records come parent-first from named_modules(); sort by depth to be safe.
        ordered = sorted(self.records.values(), key=lambda r: (r.qualname.count(".") if r.qualname else -1))
        children: dict[str, list[ModuleRecord]] = defaultdict(list)
        for record in ordered:
            if record.qualname == "":
                self._kept_of[""] = ""
                continue
            parent = parent_qualname(record.qualname)
            kept_parent = self._kept_of.get(parent) if parent is not None else ""
            if kept_parent is None:  # a parent missing from the records: attach to the root
                kept_parent = ""
            if self._is_kept(record):
                self._kept_of[record.qualname] = record.qualname
                children[kept_parent].append(record)
            else:
                self._kept_of[record.qualname] = kept_parent

        root = self.records[""]
        self._tags[""] = "/" + root.class_name
        pending = [""]
        while pending:
            parent = pending.pop()
            for child, segment in self._segments(parent, children[parent]).items():
                self._tags[child] = self._tags[parent] + "/" + segment
                pending.append(child)

    def _segments(self, kept_parent: str, kids: list[ModuleRecord]) -> dict[str, str]:
        def relative(record: ModuleRecord) -> str:
            return record.qualname[len(kept_parent) + 1:] if kept_parent else record.qualname

        short: dict[str, str] = {}
        for record in kids:
            last = record.qualname.rpartition(".")[2]
            short[record.qualname] = f"{record.class_name}.{last}" if last.isdigit() else record.class_name
        counts: dict[str, int] = defaultdict(int)
        for segment in short.values():
            counts[segment] += 1
        return {
            record.qualname: (
                short[record.qualname]
                if counts[short[record.qualname]] == 1
                else f"{record.class_name}.{relative(record)}"
            )
            for record in kids
        }

    def kept_module(self, qualname: str) -> str:
        """The module whose tag a node of ``qualname`` carries (itself, or its nearest kept ancestor)."""
        while qualname not in self._kept_of:
            parent = parent_qualname(qualname)
            if parent is None:
                return ""
            qualname = parent
        return self._kept_of[qualname]

    def tag_of(self, qualname: str) -> str:
        """The hierarchy tag of a node produced by module ``qualname``."""
        return self._tags[self.kept_module(qualname)]

    @property
    def kept_tags(self) -> dict[str, str]:
        """Qualified name to tag, for every kept module."""
        return dict(self._tags)
