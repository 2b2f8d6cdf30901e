"""Chapter parameters: typed, documented, with one default per preset, validated with clear errors.

A notebook's ``parameters`` cell declares every parameter as ``None`` (= "take the preset's value");
Papermill or the runner overrides some of them; :func:`ChapterSpec.resolve` fills in the rest from the
preset and checks every value, raising :class:`ParameterError` that names the parameter and what is allowed.
"""

from __future__ import annotations

import ast
import difflib
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import yaml

PRESETS = ("seminar", "gpu", "paper")
#: Presets whose defaults are sized for a CUDA GPU: refused at once on a machine without one.
CUDA_PRESETS = ("gpu", "paper")
#: set (to any non-empty value) in a process that only reads students from records (:func:`records_only`)
RECORDS_ONLY_ENV = "HYBRIDLIB_RECORDS_ONLY"
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


class ParameterError(ValueError):
    """A chapter parameter, preset or chapter name that is not allowed.

    In a notebook its traceback is the one line ``ParameterError: <message>`` (IPython's ``_render_traceback_``):
    the message says everything, and the library frames under it would only bury it.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def near_match(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to a misspelt ``name`` (difflib), else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def records_only() -> bool:
    """Whether this process judges from records (``$HYBRIDLIB_RECORDS_ONLY`` set, by ``python -m hybridlib.book run
    --records-only``): the chapters find the layout chapter's students in the cache (carried records) and train
    none, so a CUDA preset's students are read on any machine."""
    return bool(os.environ.get(RECORDS_ONLY_ENV))


def may_train(train: bool | None = None) -> bool:
    """``train``, or when None whether students may be trained in this process (not :func:`records_only`)."""
    return not records_only() if train is None else train


def check_device(preset: str) -> None:
    """Refuse a preset of :data:`CUDA_PRESETS` where torch sees no CUDA device, unless :func:`records_only`."""
    if preset in CUDA_PRESETS and not records_only():
        import torch

        if not torch.cuda.is_available():
            raise ParameterError(
                f"preset {preset!r} needs a CUDA GPU and torch sees none here (torch {torch.__version__}, "
                "torch.cuda.is_available() is False); on a CPU use --preset seminar (Papermill: -p preset seminar), "
                "or judge its students from carried records with `python -m hybridlib.book run --records-only`"
            )


def assigned_names(sources: Iterable[str]) -> list[str]:
    """Names assigned at top level by the Papermill parameter cells (first line ``# Parameters``) among ``sources``
    (IPython's input history ``In``): what a user passed with ``-p``/``-y``, known or not."""
    names = []
    for source in sources:
        if isinstance(source, str) and source.startswith("# Parameters"):
            try:
                body = ast.parse(source).body
            except SyntaxError:  # a cell that failed to run assigned nothing
                continue
            for node in body:
                if isinstance(node, ast.Assign):
                    names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def check_choice(what: str, value: Any, allowed: tuple | list) -> Any:
    """Return ``value`` if it is one of ``allowed``, else raise a :class:`ParameterError` naming ``what``."""
    if value not in allowed:
        raise ParameterError(
            f"{what}={value!r} is not allowed; choose one of: {', '.join(map(str, allowed))}"
        )
    return value


@dataclass(frozen=True)
class Param:
    """One notebook parameter.

    ``kind`` is ``int``, ``float``, ``str``, ``bool`` or ``list`` (then ``item`` is the item type);
    ``choices`` restricts the value (or each list item); ``minimum`` and ``maximum`` bound numbers (and list
    items) inclusively, ``exclusive_minimum`` makes the lower bound strict; ``unique`` refuses a list that names
    an item twice; ``defaults`` maps every preset to its value (checked against the bounds and choices when the
    parameter is declared).

    Papermill's forms are accepted: a list given as a YAML/JSON string (``'[a, b]'``), a number given as text
    (``"1e5"``) and an integral float for an int (``1e5`` -> ``100000``).
    """

    name: str
    kind: type
    doc: str
    defaults: Mapping[str, Any]
    unit: str = ""
    choices: tuple | None = None
    minimum: float | None = None
    item: type | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    unique: bool = False

    def __post_init__(self) -> None:
        missing = [p for p in PRESETS if p not in self.defaults]
        if missing:
            raise ValueError(f"parameter {self.name!r} has no default for preset(s) {missing}")
        if self.minimum is not None and self.maximum is not None and self.maximum < self.minimum:
            raise ValueError(f"parameter {self.name!r}: maximum {self.maximum} < minimum {self.minimum}")
        for preset in PRESETS:
            try:
                self.validate(self.defaults[preset])
            except ParameterError as err:
                raise ValueError(
                    f"the {preset} default of parameter {self.name!r} is invalid: {err}"
                ) from None

    def validate(self, value: Any) -> Any:
        """Return ``value`` coerced to this parameter's type, or raise :class:`ParameterError`."""
        if self.kind is list:
            items = self._list(value)
            items = [self._scalar(v, self.item or str, f"{self.name}[{i}]") for i, v in enumerate(items)]
            twice = [v for i, v in enumerate(items) if v in items[:i]]
            if self.unique and twice:
                raise ParameterError(
                    f"parameter {self.name!r} names {twice[0]!r} twice; give each item once, got {items!r}"
                )
            return items
        return self._scalar(value, self.kind, self.name)

    def _list(self, value: Any) -> list | tuple:
        """``value`` as a list: itself, or a YAML/JSON string read (Papermill's ``-p NAME '[a, b]'``)."""
        text = value
        if isinstance(value, str):
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError:
                pass
        if not isinstance(value, (list, tuple)):
            example = f"[{text}]" if isinstance(text, (str, int, float)) and str(text).strip() else "[a, b]"
            raise ParameterError(
                f"parameter {self.name!r} must be a list, got {text!r}; write it as a YAML list: runner "
                f"-p '{self.name}={example}', Papermill -p {self.name} '{example}' or -y '{self.name}: {example}'"
            )
        return value

    def _scalar(self, value: Any, kind: type, label: str) -> Any:
        if kind in (int, float) and isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
            value = float(value) if re.search(r"[.eE]", value) else int(value)
        if kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)  # Papermill reads -p n 1e5 as 100000.0
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
            raise ParameterError(
                f"parameter {label!r} must be of type {kind.__name__}, got {type(value).__name__} {value!r}"
            )
        if kind is float and not math.isfinite(value):
            raise ParameterError(f"parameter {label!r} must be a finite number, got {value!r}")
        if self.choices is not None:
            check_choice(f"parameter {label!r}", value, self.choices)
        if self.minimum is None:
            low = False
        else:
            low = value <= self.minimum if self.exclusive_minimum else value < self.minimum
        if low or (self.maximum is not None and value > self.maximum):
            raise ParameterError(f"parameter {label!r} must be {self.bounds()}, got {value!r}")
        return value

    def bounds(self, words: bool = False) -> str:
        """The allowed range as text: ``>= 2``, ``in [0.0, 1.0]``, ``in (0.0, 1.0]``, ``<= 8`` or ``""``; with
        ``words`` no ``=`` sign (``at least 2``, ``more than 0.0``, ``at most 8``: Papermill cannot parse a
        parameter line whose comment holds one)."""
        if self.minimum is not None and self.maximum is not None:
            return f"in {'(' if self.exclusive_minimum else '['}{self.minimum}, {self.maximum}]"
        if self.minimum is not None:
            if words:
                return f"{'more than' if self.exclusive_minimum else 'at least'} {self.minimum}"
            return f"{'>' if self.exclusive_minimum else '>='} {self.minimum}"
        if self.maximum is None:
            return ""
        return f"at most {self.maximum}" if words else f"<= {self.maximum}"

    def describe(self) -> str:
        """One line: type, unit, allowed values."""
        kind = f"list[{(self.item or str).__name__}]" if self.kind is list else self.kind.__name__
        extra = [f"unit: {self.unit}"] if self.unit else []
        if self.choices is not None:
            extra.append("allowed: " + ", ".join(map(str, self.choices)))
        if self.minimum is not None or self.maximum is not None:
            extra.append(self.bounds(words=True))
        if self.unique:
            extra.append("no repeats")
        return f"{kind}" + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class ChapterSpec:
    """A chapter: its notebook, the claim it tests, its parameters and the chapters it needs first.

    ``check`` sees the resolved values together, before any work: it raises a :class:`ParameterError` for a
    combination that cannot run (bounds that follow from the data and the machine) and returns notes for the
    reader (how a fraction rounded, say).
    """

    name: str
    title: str
    notebook: str
    claim: str
    params: tuple[Param, ...]
    depends_on: tuple[str, ...] = ()
    check: Callable[[Mapping[str, Any]], list[str]] | None = None
    _by_name: Mapping[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", MappingProxyType({p.name: p for p in self.params}))

    def param(self, name: str) -> Param:
        """The parameter called ``name``; unknown names raise a :class:`ParameterError` listing the known."""
        if name not in self._by_name:
            raise ParameterError(
                f"chapter {self.name!r} has no parameter {name!r}{near_match(name, self._by_name)}; "
                "its parameters are: " + ", ".join(["preset", *self._by_name])
            )
        return self._by_name[name]

    def resolve(self, preset: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Preset defaults updated with the non-``None`` ``overrides``, every value validated, alone and together
        (``check``)."""
        check_choice("preset", preset, PRESETS)
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        for name in overrides:
            self.param(name)
        values = {"preset": preset}
        for p in self.params:
            values[p.name] = p.validate(overrides.get(p.name, p.defaults[preset]))
        self.notes(values)
        return values

    def notes(self, values: Mapping[str, Any]) -> list[str]:
        """The reader's notes on resolved ``values`` (``check``'s), after its refusals."""
        return list(self.check(values)) if self.check is not None else []

    def parameters_cell(self) -> str:
        """Source of the notebook's ``parameters`` cell: every parameter ``None`` with its type, range and meaning."""
        lines = [
            "# Parameters (None = the preset's value; see book/parameters.md for every preset).",
            f'preset = "seminar"  # str: {" | ".join(PRESETS)}',
        ]
        lines += [f"{p.name} = None  # {p.describe()}: {p.doc}" for p in self.params]
        return "\n".join(lines)
