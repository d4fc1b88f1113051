"""Workload kinds are a registry: no module outside probes/kinds/ branches on a kind name.

The scan reads every module of probes/ and dashboard/ as a syntax tree (not text, so a
comment or a docstring never counts and a reformatted comparison still does) and reports
each place that compares a kind to a literal — ``workload.kind == "sweep"``, ``kind in
("cached", "loop")``, ``x.kind != "single"`` — or filters the database by one
(``workload__kind="sweep"``), or dispatches on a dict keyed by kind names. Such a place
belongs in the kind's module, read through probes.kinds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from probes import kinds
from probes.kinds import base
from tests.conftest import ROOT

KIND_NAMES = frozenset(kinds.KINDS)
# Where kinds are defined; migrations are history (their choices are frozen copies).
ALLOWED = ("probes/kinds/",)
SKIPPED_PARTS = {"migrations"}


def _is_kind(node: ast.AST) -> bool:
    """``kind`` or ``<anything>.kind`` (a workload's, a seed's, a row's)."""
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    return False


def _literals(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [v for elt in node.elts for v in _literals(elt)]
    return []


def _workload_kind(node: ast.AST) -> bool:
    """``workload.kind`` or ``<x>.workload.kind``: compared to any literal, it is a kind."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "kind"
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "workload")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "workload")
        )
    )


def findings(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place in ``source`` that branches on a workload kind name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for side in operands:
                if not _is_kind(side):
                    continue
                for other in operands:
                    if other is side:
                        continue
                    names = _literals(other)
                    if names and (_workload_kind(side) or KIND_NAMES & set(names)):
                        found.append((node.lineno, f"compares {ast.unparse(node)}"))
        elif isinstance(node, ast.keyword) and node.arg and node.arg.endswith("__kind"):
            if KIND_NAMES & set(_literals(node.value)):
                found.append((node.value.lineno, f"filters {node.arg}={ast.unparse(node.value)}"))
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if len(KIND_NAMES & keys) >= 2:
                found.append((node.lineno, "a dict keyed by kind names"))
    return sorted(set(found))


def scanned_modules() -> list[Path]:
    paths = []
    for top in ("probes", "dashboard"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if SKIPPED_PARTS & set(path.parts) or rel.startswith(ALLOWED):
                continue
            paths.append(path)
    return paths


def test_no_module_outside_the_kinds_compares_a_kind_to_a_literal():
    paths = scanned_modules()
    assert len(paths) > 150  # the scan reads the tree, not an empty list
    offences = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in paths
        for line, what in findings(path.read_text(encoding="utf-8"))
    ]
    assert offences == [], "read the kind from probes.kinds instead:\n" + "\n".join(offences)


@pytest.mark.parametrize(
    "code",
    [
        'if workload.kind == "sweep": pass',
        'x = probe.workload.kind != "anything"',
        'ok = kind in ("cached", "loop")',
        'ok = "parallel" == self.kind',
        'qs = Run.objects.filter(workload__kind="sweep")',
        'run = {"cached": a, "loop": b}[kind]',
        'ok = row.kind not in ["single"]',
    ],
)
def test_the_scan_catches_each_way_of_branching_on_a_kind(code):
    assert findings(code), code


@pytest.mark.parametrize(
    "code",
    [
        'if channel.kind == "email": pass',  # an alert channel's kind, not a workload's
        "if kinds.of(workload).curve: pass",
        'role = "single"',
        "# workload.kind == 'sweep' in a comment",
        '"""workload.kind == "sweep" in a docstring"""',
        'seed = Seed(kind="loop")',  # declaring a workload of a kind, not branching
    ],
)
def test_the_scan_leaves_other_kinds_and_mere_mentions_alone(code):
    assert findings(code) == [], code


def test_every_kind_of_the_model_is_registered_with_the_whole_interface():
    from probes.models.workloads import WORKLOAD_KINDS

    assert [name for name, _ in WORKLOAD_KINDS] == ["single", "cached", "loop", "parallel", "sweep"]
    for name, kind in kinds.KINDS.items():
        assert isinstance(kind, base.Kind) and kind.name == name and kind.title
        # Each kind's module says what it sends; a group kind also how it is summarised.
        assert type(kind).requests is not base.Kind.requests, name
        if kind.group:
            assert type(kind).summarize is not base.Kind.summarize, name
    with pytest.raises(ValueError, match="unknown workload kind"):
        kinds.get("batch")
