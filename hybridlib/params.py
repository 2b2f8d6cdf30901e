"""Chapter parameters: typed, documented, with one default per preset, validated with clear errors.

A notebook's ``parameters`` cell declares every parameter as ``None`` (= "take the preset's value");
Papermill or the runner overrides some of them; :func:`ChapterSpec.resolve` fills in the rest from the
preset and checks every value, raising :class:`ParameterError` that names the parameter and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

PRESETS = ("seminar", "gpu", "paper")


class ParameterError(ValueError):
    """A chapter parameter, preset or chapter name that is not allowed."""


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
    items) inclusively, ``exclusive_minimum`` makes the lower bound strict; ``defaults`` maps every preset to
    its value (checked against the bounds and choices when the parameter is declared).
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
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                raise ParameterError(f"parameter {self.name!r} must be a list, got {value!r}")
            return [self._scalar(v, self.item or str, f"{self.name}[{i}]") for i, v in enumerate(value)]
        return self._scalar(value, self.kind, self.name)

    def _scalar(self, value: Any, kind: type, label: str) -> Any:
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
            raise ParameterError(
                f"parameter {label!r} must be of type {kind.__name__}, got {type(value).__name__} {value!r}"
            )
        if self.choices is not None:
            check_choice(f"parameter {label!r}", value, self.choices)
        if self.minimum is None:
            low = False
        else:
            low = value <= self.minimum if self.exclusive_minimum else value < self.minimum
        if low or (self.maximum is not None and value > self.maximum):
            raise ParameterError(f"parameter {label!r} must be {self.bounds()}, got {value!r}")
        return value

    def bounds(self) -> str:
        """The allowed range as text: ``>= 2``, ``in [0.0, 1.0]``, ``in (0.0, 1.0]``, ``<= 8`` or ``""``."""
        if self.minimum is not None and self.maximum is not None:
            return f"in {'(' if self.exclusive_minimum else '['}{self.minimum}, {self.maximum}]"
        if self.minimum is not None:
            return f"{'>' if self.exclusive_minimum else '>='} {self.minimum}"
        return f"<= {self.maximum}" if self.maximum is not None else ""

    def describe(self) -> str:
        """One line: type, unit, allowed values."""
        kind = f"list[{(self.item or str).__name__}]" if self.kind is list else self.kind.__name__
        extra = [f"unit: {self.unit}"] if self.unit else []
        if self.choices is not None:
            extra.append("allowed: " + ", ".join(map(str, self.choices)))
        if self.minimum is not None or self.maximum is not None:
            extra.append(self.bounds())
        return f"{kind}" + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class ChapterSpec:
    """A chapter: its notebook, the claim it tests, its parameters and the chapters it needs first."""

    name: str
    title: str
    notebook: str
    claim: str
    params: tuple[Param, ...]
    depends_on: tuple[str, ...] = ()
    _by_name: Mapping[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", MappingProxyType({p.name: p for p in self.params}))

    def param(self, name: str) -> Param:
        """The parameter called ``name``; unknown names raise a :class:`ParameterError` listing the known."""
        if name not in self._by_name:
            raise ParameterError(
                f"chapter {self.name!r} has no parameter {name!r}; its parameters are: "
                + ", ".join(["preset", *self._by_name])
            )
        return self._by_name[name]

    def resolve(self, preset: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Preset defaults updated with the non-``None`` ``overrides``, every value validated."""
        check_choice("preset", preset, PRESETS)
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        for name in overrides:
            self.param(name)
        values = {"preset": preset}
        for p in self.params:
            values[p.name] = p.validate(overrides.get(p.name, p.defaults[preset]))
        return values
