"""Who is asking: a player (by the id their token names) or staff (with their role's grants)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Grant(StrEnum):
    """What a staff role may see beyond the accepted facts of a round."""

    REJECTIONS = "rejections"  # held and rejected events, with their reasons
    HASHES = "hashes"  # each fact's hashes and how to verify them


@dataclass(frozen=True, slots=True)
class Viewer:
    """A player (``player_id`` set) or a staff member (``role`` set)."""

    player_id: str | None = None
    role: str | None = None
    staff_name: str | None = None
    grants: frozenset[Grant] = frozenset()

    def __post_init__(self) -> None:
        assert (self.player_id is None) != (self.role is None), "a player or staff, not both"
        assert self.player_id is None or not self.grants, "players hold no grants"

    @property
    def is_staff(self) -> bool:
        """Whether this is a staff member."""
        return self.role is not None
