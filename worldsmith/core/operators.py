"""Operators: one job over a table of rows, with the rows' column names bound when the operator is used.

An operator declares logical input and output names; a caller binds them to the columns of its rows:
`op.run(storage, input_spec_key="spec", output_request_key="request")`. A key left unbound is the logical name
itself. `arun` is the one implementation; `run` is a thin sync wrapper. Operators that need a model get it as a
constructor argument (anything with the methods they call), never by import: core stays free of `llm`.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from worldsmith.core.aio import run_sync

if TYPE_CHECKING:
    from worldsmith.core.storage import StepStorage

Category = Literal["generate", "evaluate", "filter", "refine"]
Row = dict[str, Any]
T = TypeVar("T")
_KEY = re.compile(r"^(input|output)_(\w+?)_key$")


class BindingError(ValueError):
    """A key binding names no declared input/output of the operator."""


@dataclass(frozen=True)
class Binding:
    """Logical name -> column name, for the inputs and outputs of one use of an operator."""

    inputs: dict[str, str]
    outputs: dict[str, str]


class Operator(ABC):
    """Base of every operator. Subclasses set the class attributes and implement `transform`."""

    name: ClassVar[str] = ""
    category: ClassVar[Category] = "generate"
    description: ClassVar[str] = ""
    inputs: ClassVar[tuple[str, ...]] = ()
    outputs: ClassVar[tuple[str, ...]] = ()
    #: attributes that must be set (not None) before the operator may run; checked by `Pipeline.compile`
    required: ClassVar[tuple[str, ...]] = ()

    def bind(self, **keys: str) -> Binding:
        """Resolve `input_<x>_key` / `output_<y>_key` arguments; unknown names raise with the declared ones."""
        ins, outs = {n: n for n in self.inputs}, {n: n for n in self.outputs}
        for arg, column in keys.items():
            m = _KEY.match(arg)
            side = ins if m and m.group(1) == "input" else outs
            if m is None or m.group(2) not in side:
                raise BindingError(f"{self.name}: no binding {arg!r}; it takes "
                                   + ", ".join([f"input_{n}_key" for n in self.inputs]
                                               + [f"output_{n}_key" for n in self.outputs]))
            side[m.group(2)] = column
        return Binding(ins, outs)

    def missing(self) -> list[str]:
        return [a for a in self.required if getattr(self, a, None) is None]

    async def arun(self, storage: StepStorage, **keys: str) -> list[Row]:
        """Read the last finished step's rows, transform them, commit them as the next step (once)."""
        binding = self.bind(**keys)
        index = storage.next_index
        rows = storage.read()
        out = await self.transform(rows, binding, storage, index)
        storage.commit(index, self.name, out)
        return out

    def run(self, storage: StepStorage, **keys: str) -> list[Row]:
        return run_sync(self.arun(storage, **keys))

    @abstractmethod
    async def transform(self, rows: list[Row], binding: Binding, storage: StepStorage, index: int) -> list[Row]:
        """The operator's work: rows in, rows out (carrying the input columns along)."""


class RowOperator(Operator):
    """An operator applied to each row independently, `concurrency` rows at a time.

    `process` returns the row's outputs by logical name, a list of them (the row expands into several), or
    None (the row is filtered out). Each finished row is recorded in the step's row ledger at once, so a
    killed step resumes row-wise: rows already in the ledger are not processed again.
    """

    concurrency: int = 1

    @abstractmethod
    async def process(self, values: dict[str, Any], storage: StepStorage) -> dict[str, Any] | list[dict[str, Any]] | None:
        """Outputs for one row; `values` holds the row's inputs by logical name."""

    async def transform(self, rows: list[Row], binding: Binding, storage: StepStorage, index: int) -> list[Row]:
        done = storage.done_rows(index, self.name)
        limit = asyncio.Semaphore(max(1, self.concurrency))

        async def one(i: int, row: Row) -> None:
            async with limit:
                got = await self.process({n: row.get(c) for n, c in binding.inputs.items()}, storage)
            outs = [] if got is None else got if isinstance(got, list) else [got]
            for o in outs:
                if set(o) != set(binding.outputs):  # a later step's compile-time check relies on these columns
                    raise ValueError(f"{self.name}: row {i} gave outputs {sorted(o)}, declared {sorted(binding.outputs)}")
            done[i] = [{**row, **{binding.outputs[n]: v for n, v in o.items()}} for o in outs]
            storage.record_row(index, self.name, i, done[i])

        await gather_or_cancel([one(i, r) for i, r in enumerate(rows) if i not in done])
        return [r for i in range(len(rows)) for r in done[i]]


async def gather_or_cancel(coros: list[Awaitable[None]]) -> None:
    """Await all; the first failure cancels the rest (rows already recorded stay recorded)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# ------------------------------------------------------------------------------------------------ registry

_REGISTRY: dict[str, type[Operator]] = {}
O = TypeVar("O", bound=type[Operator])


def register_operator(cls: O) -> O:
    """Class decorator: make an operator findable by name and description."""
    if not cls.name or not cls.description:
        raise ValueError(f"{cls.__qualname__}: an operator needs a name and a description to be registered")
    other = _REGISTRY.get(cls.name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise ValueError(f"operator name {cls.name!r} is taken by {other.__module__}.{other.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def get_operator(name: str) -> type[Operator]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no operator {name!r}; registered: {', '.join(sorted(_REGISTRY)) or 'none'}") from None


def find_operators(query: str, category: Category | None = None) -> list[type[Operator]]:
    """Registered operators whose name or description shares words with the query, best match first."""
    words = {w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) > 2 or w.isdigit()}
    scored: list[tuple[int, str, type[Operator]]] = []
    for name, cls in _REGISTRY.items():
        if category is not None and cls.category != category:
            continue
        text = set(re.findall(r"[a-z0-9]+", f"{name.replace('_', ' ')} {cls.description}".lower()))
        name_words = set(name.split("_"))
        score = sum(2 if w in name_words else 1 for w in words if w in text or any(t.startswith(w) for t in text))
        if score:
            scored.append((-score, name, cls))
    return [cls for _, _, cls in sorted(scored, key=lambda s: (s[0], s[1]))]

