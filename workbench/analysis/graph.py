"""What each edge waits for, from ninja's own graph (`ninja -t graph`, Graphviz text).

ninja prints every node as `"0xID" [label="path"]`; an edge with one input and one output as
an arrow labelled with its rule, any other as an ellipse node (`[label="rule",
shape=ellipse]`) with arrows to its outputs and from its inputs (`arrowhead=none`, order-only
inputs also `style=dotted`) (ninja's src/graphviz.cc). Paths are the manifest's, the same as
`.ninja_log`'s outputs.

Edges ninja did not run in this build (phony edges, up-to-date ones) are looked through: an
edge depends on the executed edges behind them.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError

_NODE = re.compile(r'^"([^"]+)" \[label="(.*)"(, shape=ellipse)?\]$')
_ARROW = re.compile(r'^"([^"]+)" -> "([^"]+)"(?: \[(.*)\])?$')
GRAPH_TIMEOUT_S = 60.0


class GraphError(WorkbenchError):
    """ninja could not print the build graph."""


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """One edge of the manifest: its rule, inputs (explicit, implicit, order-only), outputs."""

    rule: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class BuildGraph:
    """The manifest's edges, by output."""

    producer: dict[str, GraphEdge] = field(default_factory=dict)

    @property
    def edge_count(self) -> int:
        """Edges that are not phony: what a full build runs."""
        return len({id(e) for e in self.producer.values() if e.rule != "phony"})

    def rule_of(self, output: str) -> str | None:
        """The rule that makes `output`, when the graph has it."""
        edge = self.producer.get(output)
        return edge.rule if edge is not None else None

    def executed_dependencies(self, executed: Iterable[Sequence[str]]) -> dict[str, list[str]]:
        """Per executed edge (named by its first output): the executed edges it waited for.

        `executed` gives each executed edge's outputs."""
        name_of: dict[str, str] = {}
        for outputs in executed:
            for output in outputs:
                name_of[output] = outputs[0]
        behind: dict[int, frozenset[str]] = {}

        def through(edge: GraphEdge) -> frozenset[str]:
            """Executed edges reached from a not-executed edge (iterative: graphs are deep)."""
            key = id(edge)
            if key in behind:
                return behind[key]
            stack: list[tuple[GraphEdge, int, set[str]]] = [(edge, 0, set())]
            while stack:
                current, index, found = stack[-1]
                if index == len(current.inputs):
                    stack.pop()
                    result = frozenset(found)
                    behind[id(current)] = result
                    if stack:
                        stack[-1][2].update(result)
                    continue
                stack[-1] = (current, index + 1, found)
                path = current.inputs[index]
                if path in name_of:
                    found.add(name_of[path])
                    continue
                producer = self.producer.get(path)
                if producer is None:
                    continue
                if id(producer) in behind:
                    found.update(behind[id(producer)])
                elif all(id(producer) != id(item[0]) for item in stack):
                    stack.append((producer, 0, set()))
            return behind[key]

        dependencies: dict[str, list[str]] = {}
        for output, name in name_of.items():
            if output != name:
                continue
            edge = self.producer.get(output)
            if edge is None:
                dependencies[name] = []
                continue
            found: set[str] = set()
            for path in edge.inputs:
                if path in name_of:
                    found.add(name_of[path])
                    continue
                producer = self.producer.get(path)
                if producer is not None:
                    found.update(through(producer))
            found.discard(name)
            dependencies[name] = sorted(found)
        return dependencies


def parse_graph(text: str) -> BuildGraph:
    """`ninja -t graph`'s output as a BuildGraph."""
    paths: dict[str, str] = {}
    rules: dict[str, str] = {}
    simple: list[tuple[str, str, str]] = []
    outputs: dict[str, list[str]] = {}
    inputs: dict[str, list[str]] = {}
    arrows: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        node = _NODE.match(line)
        if node is not None:
            ident, label, ellipse = node.groups()
            if ellipse:
                rules[ident] = label
            else:
                paths[ident] = label
            continue
        arrow = _ARROW.match(line)
        if arrow is not None:
            arrows.append((arrow.group(1), arrow.group(2), arrow.group(3) or ""))
    for source, target, attributes in arrows:
        if source in rules:
            outputs.setdefault(source, []).append(target)
        elif target in rules:
            inputs.setdefault(target, []).append(source)
        else:
            rule = attributes.partition('label="')[2].rstrip('"').strip()
            simple.append((source, target, rule))
    graph = BuildGraph()
    for source, target, rule in simple:
        if target in paths and source in paths:
            edge = GraphEdge(rule, (paths[source],), (paths[target],))
            graph.producer[paths[target]] = edge
    for ident, rule in rules.items():
        edge = GraphEdge(
            rule,
            tuple(paths[i] for i in inputs.get(ident, ()) if i in paths),
            tuple(paths[o] for o in outputs.get(ident, ()) if o in paths),
        )
        for output in edge.outputs:
            graph.producer[output] = edge
    return graph


def read_graph(
    build_directory: Path, targets: Sequence[str] = (), ninja: str = "ninja"
) -> BuildGraph:
    """The graph of a ninja build directory (`ninja -C DIR -t graph [TARGETS]`)."""
    argv = [ninja, "-C", str(build_directory), "-t", "graph", *targets]
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            timeout=GRAPH_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GraphError(f"{' '.join(argv)}: {exc}") from None
    if result.returncode != 0:
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GraphError(f"{' '.join(argv)}: {said[-1] if said else f'exit {result.returncode}'}")
    return parse_graph(result.stdout.decode("utf-8", "surrogateescape"))
