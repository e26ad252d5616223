"""The four ways a node is derived (issue 13, item 3) and the exploration graph as the director reads it.

- deepen: one verified parent; the goal builds on its finding.
- search: like deepen, plus passages retrieved from the run's document corpus (user documents, memos, earlier
  findings) through memory; a web-search interface exists and is off unless configured (these machines are
  offline, and an offline run must say so rather than pretend it searched).
- decompose: a compound objective is split into parts; each part becomes its own child workspace (a sibling
  node with its own snapshot), so the parts are analysed in isolation.
- compose: >= 2 verified nodes are merged by the store (files deduplicated, name conflicts renamed) and
  analysed jointly.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from worldsmith.core.evolution_schemas import NodeRecord
from worldsmith.core.schemas import Finding
from worldsmith.core.workspace_types import Node, finding_id

#: NodeRecord statuses (the director's vocabulary) for the store's node statuses.
_RECORD_STATUS = {"supported": "verified", "revised": "revised", "unsupported": "unsupported", "failed": "failed",
                  "proposed": "pending", "running": "pending"}
MAX_PARTS = 3


def root_finding(root: Node, overview: str) -> Finding:
    """The root states no analysis; it is the given ground, summarised by the profile, so the director can
    expand it like any verified node (its id is the root's finding id, which children may depend on)."""
    return Finding(id=finding_id(root.id), node_id=str(root.id), statement=f"The initial workspace: {overview}",
                   status="supported")


def node_records(nodes: list[Node], overview: str) -> list[NodeRecord]:
    """The store's nodes as the director reads them (ids as strings, one finding per node)."""
    out = []
    for n in nodes:
        if n.mode == "root":
            findings = [root_finding(n, overview)]
        else:
            findings = [n.finding()] if n.conclusion.strip() else []
        out.append(NodeRecord(id=str(n.id), parents=[str(p) for p in n.parents], mode=n.mode, depth=n.depth,
                              status=_RECORD_STATUS[n.status], goal=n.goal, findings=findings))  # type: ignore[arg-type]
    return out


def verified_findings(nodes: list[Node], overview: str) -> list[Finding]:
    """Every finding later work may build on: the root's and those of supported or revised nodes."""
    return [f for r in node_records(nodes, overview) for f in r.findings if f.status in ("supported", "revised")]


def node_of(finding: str) -> int:
    """The node id of a finding id (``f<id>``)."""
    if not re.fullmatch(r"f\d+", finding):
        raise ValueError(f"{finding!r} is not a node finding id (f<node id>)")
    return int(finding[1:])


# --------------------------------------------------------------------------------------------- search


class WebSearch(Protocol):
    """A web search backend: query → passages (title, url, text)."""

    enabled: bool

    async def search(self, query: str, k: int) -> list[dict[str, str]]: ...


class OfflineWebSearch:
    """The web search of an offline machine: off. It answers nothing, and the run records that it was off."""

    enabled = False

    async def search(self, query: str, k: int) -> list[dict[str, str]]:
        return []


async def search_context(memory: Any, question: str, *, k: int = 4, web: WebSearch | None = None,
                         exclude_findings: set[str] | None = None) -> tuple[str, list[str]]:
    """Passages relevant to ``question`` from the run's documents and earlier verified findings (and the web when
    a search backend is on), as a context block for the executor, and the sources it cites."""
    docs = await memory.asearch_documents(question, k=k)
    findings = await memory.asearch_findings(question, k=k, where={"status": {"$in": ["supported", "revised"]}})
    lines, sources = [], []
    for hit in docs:
        source = str(hit.metadata.get("source", hit.id))
        lines.append(f"[document {source}] {hit.text.strip()}")
        sources.append(source)
    for hit in findings:
        if exclude_findings and hit.id in exclude_findings:
            continue
        lines.append(f"[finding {hit.id}] {hit.text.strip()}")
        sources.append(hit.id)
    if web is not None and web.enabled:
        for page in await web.search(question, k):
            lines.append(f"[web {page.get('url', '')}] {page.get('text', '').strip()}")
            sources.append(page.get("url", "web"))
    if not lines:
        return "", []
    return "Retrieved material (cite what you use; verify every number against the data):\n" + "\n".join(
        f"- {line}" for line in lines), list(dict.fromkeys(sources))


# --------------------------------------------------------------------------------------------- decompose

_SPLIT = re.compile(r";|\?\s+|\.\s+(?=[A-Z])|,?\s+and (?:then |also )?(?=(?:what|which|how|whether|is|are|does|do|"
                    r"compute|estimate|compare|test|find|identify|measure)\b)", re.IGNORECASE)


def split_objective(objective: str, max_parts: int = MAX_PARTS) -> list[str]:
    """The parts of a compound objective by its own punctuation and conjunctions ('...; ...', '... and what ...');
    one part when it is not compound. The deterministic fallback when the decomposer gives nothing usable."""
    parts = [p.strip(" .;,") for p in _SPLIT.split(objective) if p and p.strip(" .;,")]
    parts = [p[0].upper() + p[1:] + ("" if p.endswith("?") else ".") for p in parts if len(p.split()) >= 3]
    return parts[:max_parts] if len(parts) >= 2 else [objective.strip()]
