"""The one test suite every partition ownership adapter must pass (``PartitionLeases`` and
the fencing of ``Ledger.append``), with the ``PartitionOwner`` that drives it.

A subclass provides the ``ledger_url`` fixture (a fresh, empty ledger per test), ``raw``
(a statement run as the owner, triggers in force) and ``refused`` (what the database raises
when a trigger refuses a change).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Sequence

import pytest
from unit.croupier.test_relay import a_round, deliveries

from croupier.bus.memory import MemoryBus
from croupier.ledger import (
    Fence,
    Fenced,
    Ledger,
    PartitionsFixed,
    StreamAppend,
    open_ledger,
)
from croupier.ledger.partitions import (
    DEFAULT_PARTITIONS,
    fair_share,
    partition_of,
)
from croupier.metrics import Metrics
from croupier.settlement.facts import Fact
from croupier.settlement.partitions import PartitionOwner
from croupier.settlement.relay import OutboxRelay
from croupier.settlement.settler import Settler

#: Partitions of the suite's ledgers (small, so that tables of every partition are at hand).
P = 8
#: The term of an owner that commits, then lapses: long enough for its commit on a busy machine.
LAPSING = 2.0


def table_in(partition: int, partitions: int = P) -> str:
    """A table id of ``partition``."""
    return next(f"T{n}" for n in range(10_000) if partition_of(f"T{n}", partitions) == partition)


def a_fact(table: str) -> StreamAppend:
    return StreamAppend(f"round:{table}:R{time.monotonic_ns()}", 0, [Fact("t", {"n": 1}, _key())])


def _key() -> str:
    return f"k{time.monotonic_ns()}"


def fenced(metrics: Metrics, partition: int) -> float:
    value = metrics.registry.get_sample_value(
        "croupier_appends_fenced_total", {"partition": str(partition)}
    )
    return value or 0.0


async def eventually(check: Callable[[], object], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.02)


class PartitionSuite:
    """Behaviour common to all adapters; subclasses supply the database."""

    refused: tuple[type[BaseException], ...] = ()

    @pytest.fixture
    def ledger_url(self) -> str:
        raise NotImplementedError

    async def raw(self, url: str, statement: str) -> None:
        """Run ``statement`` as the owner, triggers in force."""
        raise NotImplementedError

    @pytest.fixture
    async def ledger(self, ledger_url: str) -> AsyncIterator[Ledger]:
        ledger = open_ledger(ledger_url)
        await ledger.migrate(partitions=P)
        yield ledger
        await ledger.close()

    @pytest.fixture
    async def other(self, ledger_url: str, ledger: Ledger) -> AsyncIterator[Ledger]:
        """The same ledger opened a second time, as another instance opens it."""
        other = open_ledger(ledger_url)
        yield other
        await other.close()

    def owner(self, ledger: Ledger, name: str, term: float = 10.0) -> PartitionOwner:
        return PartitionOwner(ledger, name, Metrics(), term=term, poll=min(0.2, term / 4))

    # -- the count ------------------------------------------------------------------------

    def test_a_table_partition_is_the_first_8_bytes_of_its_sha256_mod_p(self) -> None:
        digest = hashlib.sha256(b"table-7").digest()
        assert partition_of("table-7", 64) == int.from_bytes(digest[:8], "big") % 64
        assert partition_of("table-7", 64) == 59  # fixed: a table never moves
        assert {partition_of(f"T{n}", P) for n in range(200)} == set(range(P))
        assert fair_share(64, 3) == 22
        assert fair_share(64, 1) == 64
        assert fair_share(8, 0) == 8

    async def test_the_count_is_stored_at_creation_and_every_lease_is_free(
        self, ledger: Ledger
    ) -> None:
        leases = ledger.partition_leases()
        assert await leases.count() == P
        stored = await leases.leases()
        assert [(lease.partition, lease.owner, lease.epoch) for lease in stored] == [
            (p, None, 0) for p in range(P)
        ]
        assert all(lease.expires_in < 0 for lease in stored)
        assert await leases.instances() == []

    async def test_the_count_is_never_changed_afterwards(
        self, ledger: Ledger, ledger_url: str
    ) -> None:
        assert await ledger.migrate() == []
        assert await ledger.migrate(partitions=P) == []
        with pytest.raises(PartitionsFixed, match=f"has {P} partitions"):
            await ledger.migrate(partitions=P * 2)
        with pytest.raises(self.refused):
            await self.raw(ledger_url, "UPDATE ledger_partitions SET count = 4")
        with pytest.raises(self.refused):
            await self.raw(ledger_url, "DELETE FROM ledger_partitions")
        assert await ledger.partition_leases().count() == P

    async def test_a_new_ledger_has_the_default_count(self, ledger_url: str) -> None:
        async with open_ledger(ledger_url) as fresh:
            await fresh.migrate()
            assert await fresh.partition_leases().count() == DEFAULT_PARTITIONS
            assert len(await fresh.partition_leases().leases()) == DEFAULT_PARTITIONS

    async def test_an_owner_change_needs_a_new_epoch(self, ledger: Ledger, ledger_url: str) -> None:
        await ledger.partition_leases().take("a", 10, 1)
        with pytest.raises(self.refused):
            await self.raw(
                ledger_url, "UPDATE partition_leases SET owner = 'b' WHERE partition = 0"
            )
        with pytest.raises(self.refused):
            await self.raw(ledger_url, "UPDATE partition_leases SET epoch = 0 WHERE partition = 0")
        with pytest.raises(self.refused):
            await self.raw(ledger_url, "DELETE FROM partition_leases")
        (lease, *_) = await ledger.partition_leases().leases()
        assert (lease.owner, lease.epoch) == ("a", 1)

    # -- the port -------------------------------------------------------------------------

    async def test_take_renew_release_with_epochs(self, ledger: Ledger) -> None:
        leases = ledger.partition_leases()
        taken = await leases.take("a", 10, 3)
        assert [(t.partition, t.epoch, t.unowned, t.lapsed) for t in taken] == [
            (0, 1, None, None),
            (1, 1, None, None),
            (2, 1, None, None),
        ]
        assert [t.partition for t in await leases.take("b", 10, 2)] == [3, 4]
        assert await leases.renew("a", 20) == {0: 1, 1: 1, 2: 1}  # the epoch is kept
        assert 19 < (await leases.leases())[0].expires_in <= 20
        assert await leases.release("b", [0, 3]) == [3]  # not another's
        assert await leases.release("a", [1]) == [1]
        assert await leases.renew("a", 10) == {0: 1, 2: 1}
        (again,) = await leases.take("b", 10, 1)
        assert (again.partition, again.epoch) == (1, 2)  # taken again: a new epoch
        assert again.unowned is not None and 0 <= again.unowned < 5
        assert again.lapsed is None  # released: nobody's lease lapsed
        assert await leases.release("a") == [0, 2]
        assert [(lease.owner, lease.epoch) for lease in (await leases.leases())[:5]] == [
            (None, 1),
            ("b", 2),
            (None, 1),
            (None, 1),
            ("b", 1),
        ]

    async def test_two_owners_racing_get_disjoint_partitions(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        one, two = ledger.partition_leases(), other.partition_leases()
        a, b = await asyncio.gather(one.take("a", 10, P), two.take("b", 10, P))
        assert not {t.partition for t in a} & {t.partition for t in b}
        assert sorted(t.partition for t in a + b) == list(range(P))
        assert {t.epoch for t in a + b} == {1}
        owners = {lease.partition: lease.owner for lease in await one.leases()}
        assert owners == {t.partition: "a" for t in a} | {t.partition: "b" for t in b}

    async def test_an_expired_lease_is_not_renewed_but_taken_with_a_new_epoch(
        self, ledger: Ledger
    ) -> None:
        leases = ledger.partition_leases()
        await leases.take("a", 0.3, 1)
        await asyncio.sleep(0.4)
        assert await leases.renew("a", 10) == {}  # expired: lost, even with no taker yet
        (taken,) = await leases.take("b", 10, 1)
        assert (taken.partition, taken.epoch) == (0, 2)
        assert taken.unowned is not None and 0.05 < taken.unowned < 5
        assert taken.lapsed == "a"  # what a left unpublished is the new owner's to relay

    async def test_instances_register_and_leave(self, ledger: Ledger) -> None:
        leases = ledger.partition_leases()
        assert await leases.register("a", 10) == 1
        assert await leases.register("b", 10) == 2
        await leases.take("a", 10, 2)
        assert [i.id for i in await leases.instances()] == ["b", "a"]
        assert await leases.leave("a") == [0, 1]
        assert [i.id for i in await leases.instances()] == ["b"]
        assert await leases.register("b", 10) == 1

    # -- fencing in the append ------------------------------------------------------------

    async def test_an_append_fenced_at_the_held_epoch_is_written(self, ledger: Ledger) -> None:
        await ledger.partition_leases().take("a", 10, P)
        await ledger.append([a_fact("T1")], fence=Fence("a", {partition_of("T1", P): 1}))
        assert await ledger.last_position() == 1

    @pytest.mark.parametrize(
        "fence",
        [
            Fence("b", {0: 1}),  # another owner
            Fence("a", {0: 2}),  # another epoch
            Fence("a", {0: 1, 1: 1}),  # one partition not held
        ],
    )
    async def test_an_append_fenced_otherwise_is_refused_and_writes_nothing(
        self, ledger: Ledger, fence: Fence
    ) -> None:
        await ledger.partition_leases().take("a", 10, 1)
        with pytest.raises(Fenced) as refused:
            await ledger.append([a_fact("T1")], fence=fence)
        assert refused.value.code == "fenced"
        assert refused.value.partitions in ((0,), (1,))
        assert await ledger.last_position() == 0

    async def test_an_append_after_the_lease_expired_is_refused(self, ledger: Ledger) -> None:
        await ledger.partition_leases().take("a", 0.3, P)
        await asyncio.sleep(0.4)  # nobody took it: still refused
        with pytest.raises(Fenced):
            await ledger.append([a_fact("T1")], fence=Fence("a", {partition_of("T1", P): 1}))
        assert await ledger.last_position() == 0

    async def test_an_append_without_a_fence_is_not_checked(self, ledger: Ledger) -> None:
        await ledger.partition_leases().take("someone else", 10, P)
        await ledger.append([a_fact("T1")])  # the single-instance service, as before
        assert await ledger.last_position() == 1

    # -- the owner ------------------------------------------------------------------------

    async def test_a_single_instance_holds_every_partition(self, ledger: Ledger) -> None:
        owner = self.owner(ledger, "a")
        await owner.balance()
        assert owner.held == {p: 1 for p in range(P)}
        assert owner.metrics.registry.get_sample_value("croupier_partitions_owned") == P
        for table in ("T1", "T2", "T3"):
            await owner.append([a_fact(table)], tables=[table])
        assert await ledger.last_position() == 3
        leases = await ledger.partition_leases().leases()
        assert {(lease.owner, lease.epoch) for lease in leases} == {("a", 1)}
        assert all(9 < lease.expires_in <= 10 for lease in leases)

    async def test_instances_balance_to_their_fair_share(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        a, b = self.owner(ledger, "a"), self.owner(other, "b")
        await a.balance()
        await b.balance()  # registered; nothing free yet
        assert (len(a.held), len(b.held)) == (P, 0)
        await a.balance()  # two live instances: a gives back what is beyond its share
        assert sorted(a.held) == list(range(P // 2))
        await b.balance()
        assert sorted(b.held) == list(range(P // 2, P))
        assert set(b.held.values()) == {2}  # taken from a: a new epoch
        released = a.metrics.registry.get_sample_value(
            "croupier_partition_handovers_total", {"how": "released"}
        )
        assert released == P // 2
        await a.balance()
        await b.balance()  # balanced: nothing moves
        assert (sorted(a.held), sorted(b.held)) == (list(range(P // 2)), list(range(P // 2, P)))

    async def test_partitions_are_given_back_to_the_feed_before_they_are_released(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        """What is beyond the share goes to ``give_back`` while its leases are still held
        (its batch in hand commits, fenced by nothing), within a quarter of the term;
        released after. A ``give_back`` that fails does not keep the partitions."""
        a, b = self.owner(ledger, "a", term=2.0), self.owner(other, "b")
        await a.balance()
        await b.balance()
        calls: list[tuple[list[int], float, set[int]]] = []

        async def give_back(partitions: Sequence[int], within: float) -> None:
            leases = await ledger.partition_leases().leases()
            still = {x.partition for x in leases if x.owner == "a" and x.expires_in > 0}
            calls.append((list(partitions), within, still))
            await a.append([a_fact(table_in(partitions[0]))], tables=[table_in(partitions[0])])

        await a.balance(give_back)
        ((given, within, still),) = calls
        assert given == list(range(P // 2, P)) and within == 0.5
        assert set(given) <= still  # held while the feed settled them
        assert sorted(a.held) == list(range(P // 2))  # released after
        assert fenced(a.metrics, given[0]) == 0

        async def broken(partitions: Sequence[int], within: float) -> None:
            raise ConnectionError("the broker went away")

        c = self.owner(other, "c")
        await c.balance()
        await a.balance(broken)
        assert len(a.held) == -(-P // 3)

    async def test_an_expired_owner_is_taken_over_and_its_append_refused_and_counted(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        a, b = self.owner(ledger, "a", term=0.5), self.owner(other, "b", term=10)
        await a.balance()
        await asyncio.sleep(0.6)  # a paused past its term: no renewal
        await b.balance()
        assert b.held == {p: 2 for p in range(P)}
        took = b.metrics.registry.get_sample_value("croupier_partition_handover_seconds_count")
        assert took == P
        table = table_in(5)
        assert a.held[5] == 1  # a still believes it holds partition 5
        with pytest.raises(Fenced) as refused:
            await a.append([a_fact(table)], tables=[table])
        assert refused.value.partitions == (5,)
        assert fenced(a.metrics, 5) == 1
        assert 5 not in a.held
        with pytest.raises(Fenced):  # refused again, now before the database
            await a.append([a_fact(table)], tables=[table])
        assert fenced(a.metrics, 5) == 2
        assert await ledger.last_position() == 0
        await b.append([a_fact(table)], tables=[table])
        assert await ledger.last_position() == 1

    async def test_partitions_of_a_lapsed_owner_are_handed_over_with_its_leftovers(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        """Taken from an owner whose lease lapsed: ``on_lapsed`` hears the partitions and
        the position below which that owner's facts lie. Released or never owned: not."""
        a, b = self.owner(ledger, "a", term=LAPSING), self.owner(other, "b", term=10)
        heard: list[tuple[frozenset[int], int, int]] = []
        a.on_lapsed = b.on_lapsed = lambda *lapsed: heard.append(lapsed)
        await a.balance()  # never owned before
        table = table_in(5)
        await a.append([a_fact(table)], tables=[table])
        assert heard == []
        await asyncio.sleep(LAPSING + 0.1)  # a paused past its term
        await b.balance()
        assert heard == [(frozenset(range(P)), P, 1)]
        await b.leases.release("b", [5])
        await a.balance()  # takes what b released: nobody's lease lapsed
        assert 5 in a.held and len(heard) == 1

    async def test_the_new_owner_publishes_what_a_lapsed_owner_committed_and_left(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        """An owner commits a round fenced, then lapses before publishing it: the owner
        that takes its partition over publishes the result, once, as it takes it (the
        relay lease is another's, whose grace has not passed)."""
        a, b = self.owner(ledger, "a", term=LAPSING), self.owner(other, "b")
        await a.balance()
        table = table_in(5)
        settler = Settler(ledger, fence=a.fence, owns=lambda t: a.partition(t) in a.held)
        committed = (await settler.handle(deliveries(a_round(table)))).outbox
        (result,) = [m.message_id for _, messages in committed for m in messages]
        bus, got = MemoryBus(), []
        bus.subscribe("#", lambda message: got.append(message.message_id))
        holder = OutboxRelay(ledger, bus, Metrics(), holder="holder", writer_grace=60)
        assert await holder.hold()
        heir = OutboxRelay(other, bus, Metrics(), holder="heir", writer_grace=60)
        b.on_lapsed = heir.adopt
        await asyncio.sleep(LAPSING + 0.1)  # a paused past its term, its result unpublished
        await b.balance()
        assert await heir.relay_leftovers() == 1
        assert got == [result]
        assert await other.pending_outbox() == []
        assert await heir.relay_leftovers() == 0

    async def test_a_graceful_stop_frees_every_partition_at_once(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        a, b = self.owner(ledger, "a"), self.owner(other, "b")
        await a.balance()
        await b.balance()
        await a.stop()
        assert {lease.owner for lease in await ledger.partition_leases().leases()} == {None}
        await b.balance()  # no wait for any term
        assert b.held == {p: 2 for p in range(P)}
        handover = b.metrics.registry.get_sample_value("croupier_partition_handover_seconds_sum")
        assert handover is not None and handover < P * 1.0
        assert [i.id for i in await ledger.partition_leases().instances()] == ["b"]
        with pytest.raises(Fenced):
            await a.append([a_fact("T1")], tables=["T1"])

    async def test_the_longest_unowned_partition_is_measured_and_exported(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        a, b = self.owner(ledger, "a", term=0.5), self.owner(other, "b")
        await a.balance()
        assert a.metrics.registry.get_sample_value("croupier_partition_unowned_seconds") == 0
        await a.leases.release("a", [3])  # released: unowned since the release
        await asyncio.sleep(0.3)
        assert 0.25 <= await b.unowned() < 1.5
        await asyncio.sleep(0.4)  # the rest expired 0.5 s after a's take
        assert 0.25 <= await b.unowned() < 1.5
        await a.leases.take("a", 10, P)  # every partition owned again
        assert await b.unowned() == 0

    async def test_a_partition_never_owned_counts_from_when_it_was_first_seen_so(
        self, ledger: Ledger
    ) -> None:
        a = self.owner(ledger, "a")
        assert await a.unowned() < 0.05  # every partition free since the ledger began
        await asyncio.sleep(0.3)
        assert 0.25 <= await a.unowned() < 1.5
        await a.balance()  # takes them all, then reads the leases again
        assert a.metrics.registry.get_sample_value("croupier_partition_unowned_seconds") == 0

    async def test_run_takes_a_released_partition_within_a_poll(
        self, ledger: Ledger, other: Ledger
    ) -> None:
        a, b = self.owner(ledger, "a"), self.owner(other, "b")
        await a.balance()
        stopping = asyncio.Event()
        running = asyncio.create_task(b.run(stopping))
        try:
            await eventually(lambda: b.count)  # b registered and polling
            await a.stop()
            started = time.monotonic()
            await eventually(lambda: len(b.held) == P)
            assert time.monotonic() - started < 2.0
        finally:
            stopping.set()
            await running
        assert {lease.owner for lease in await ledger.partition_leases().leases()} == {None}
