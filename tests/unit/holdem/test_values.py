"""``holdem.values.quick``: the same frozen value as the dataclass gives, built faster."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from croupier.ledger import OutboxMessage
from croupier.settlement.facts import Fact
from croupier.settlement.round import PlacedBet
from croupier.settlement.settler import Inbound
from holdem.bets import BetResult, Decision, Wager
from holdem.values import quick


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    name: str
    amount: int
    note: str | None = None
    tags: tuple[str, ...] = ()


@quick
@dataclasses.dataclass(frozen=True, slots=True)
class Quick:
    name: str
    amount: int
    note: str | None = None
    tags: tuple[str, ...] = ()


def _fields(value: object) -> tuple[object, ...]:
    return tuple(getattr(value, f.name) for f in dataclasses.fields(value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("a", 1), {}),
        (("a", 1, "n"), {}),
        (("a",), {"amount": 2, "tags": ("x",)}),
        ((), {"name": "b", "amount": 3}),
    ],
)
def test_it_builds_what_the_dataclass_builds(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    plain, fast = Plain(*args, **kwargs), Quick(*args, **kwargs)  # type: ignore[arg-type]
    assert _fields(fast) == _fields(plain)
    assert repr(fast) == repr(plain).replace("Plain", "Quick")
    assert fast == Quick(*args, **kwargs)  # type: ignore[arg-type]
    assert hash(fast) == hash(Quick(*args, **kwargs))  # type: ignore[arg-type]


def test_its_signature_and_errors_are_the_dataclass_ones() -> None:
    assert str(inspect.signature(Quick)) == str(inspect.signature(Plain))
    with pytest.raises(TypeError):
        Quick("a")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Quick("a", 1, unknown=2)  # type: ignore[call-arg]


def test_the_value_stays_frozen() -> None:
    value = Quick("a", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.amount = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del value.name


def test_it_refuses_what_it_cannot_build_alike() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        name: str

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        tags: list[str] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        amount: int

        def __post_init__(self) -> None:
            assert self.amount >= 0

    for cls in (NoSlots, Factory, Checked):
        with pytest.raises(AssertionError):
            quick(cls)


@pytest.mark.parametrize(
    "cls", [Fact, Inbound, PlacedBet, Wager, Decision, BetResult, OutboxMessage]
)
def test_the_values_built_per_message_are_quick(cls: type) -> None:
    assert cls.__init__.__module__ == "holdem.values"  # type: ignore[misc]
