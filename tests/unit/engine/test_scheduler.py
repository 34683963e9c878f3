import pytest

from kit.engine.scheduler import plan, rotated
from kit.results.planned import Config


def configs(n: int) -> list[Config]:
    return [Config("L4", "m", "float32", "pytorch", f"v{i}") for i in range(n)]


def test_discarded_round_first_then_rotating_rounds():
    cs = configs(3)
    order = plan(cs, runs=5, discarded_runs=1)
    assert len(order) == 3 * 6
    assert [r.run_id for r in order] == list(range(18))
    first = order[:3]
    assert all(r.discarded and r.round == 0 for r in first)
    assert [r.config for r in first] == [c.id for c in cs]
    by_round = {}
    for r in order[3:]:
        assert not r.discarded
        by_round.setdefault(r.round, []).append(r.config[-2:])
    assert by_round == {
        1: ["v1", "v2", "v0"],
        2: ["v2", "v0", "v1"],
        3: ["v0", "v1", "v2"],
        4: ["v1", "v2", "v0"],
        5: ["v2", "v0", "v1"],
    }


def test_every_configuration_once_per_round():
    cs = configs(4)
    order = plan(cs, runs=5, discarded_runs=1)
    for rnd in range(0, 6):
        ids = sorted(r.config for r in order if r.round == rnd)
        assert ids == sorted(c.id for c in cs)


def test_rotated():
    assert rotated([1, 2, 3], 0) == [1, 2, 3]
    assert rotated([1, 2, 3], 4) == [2, 3, 1]
    assert rotated([], 2) == []


def test_aa_rounds_follow_the_protocols_plan_unchanged():
    from kit.results.planned import AA, AA_TWIN, PROFILE

    cs = configs(3)
    chosen = [cs[0].id, cs[2].id]
    before = plan(cs, runs=5, discarded_runs=1, separate=[(PROFILE, [c.id for c in cs])])
    order = plan(cs, 5, 1, [(PROFILE, [c.id for c in cs])], chosen)
    # the protocol's runs keep their places and ids; the A/A rounds come between them and §6's
    assert order[:18] == before[:18]
    aa = order[18:38]
    assert [r.run_id for r in order] == list(range(len(order)))
    assert {r.kind for r in aa} == {AA, AA_TWIN} and order[38].kind == PROFILE
    for rnd in range(1, 6):
        mine = [(r.config, r.kind) for r in aa if r.round == rnd]
        assert len(mine) == 4 and sorted(c for c, _ in mine) == sorted(chosen * 2)
        # the pairs rotate as D3's rounds do; the twin runs first in odd rounds, second in even
        pairs = [c for c, _ in mine[::2]]
        assert pairs == rotated(chosen, rnd)
        first = AA_TWIN if rnd % 2 else AA
        assert [k for _, k in mine[::2]] == [first, first]
        assert all(a[0] == b[0] for a, b in zip(mine[::2], mine[1::2]))


def test_no_aa_rounds_unless_chosen():
    cs = configs(2)
    assert plan(cs, 5, 1) == plan(cs, 5, 1, aa=[])


def _mixed() -> list[Config]:
    return [
        Config("cpu", "m", "float32", "pytorch", "eager"),
        Config("cpu", "m", "float32", "pytorch", "default"),
        Config("cpu", "m", "float32", "contender", "mica"),
        Config("cpu", "m", "float16", "pytorch", "eager"),
        Config("cpu", "m", "float16", "contender", "mica-strict"),
        Config("cpu", "m", "float16", "contender", "mica-half"),
    ]


def test_aa_by_default_chooses_the_primary_build_and_pytorchs_default_mode():
    from kit.engine.scheduler import aa_chosen

    cs = _mixed()
    primary = {c.id: c.variant != "mica-half" for c in cs}
    assert aa_chosen(["primary"], cs, primary) == [
        "m/float32/pytorch/default",
        "m/float32/contender/mica",
        "m/float16/pytorch/eager",  # no default mode in this series: its first mode
        "m/float16/contender/mica-strict",
    ]
    assert aa_chosen(["all"], cs, primary) == [c.id for c in cs]
    assert aa_chosen([], cs, primary) == []
    named = ["m/float16/contender/mica-half", "m/float32/pytorch/eager"]
    assert aa_chosen(named, cs, primary) == [named[1], named[0]]  # in the series' order


def test_aa_naming_an_unknown_configuration_says_which_exist():
    from kit.engine.scheduler import aa_chosen
    from kit.errors import UserError

    cs = _mixed()
    with pytest.raises(UserError) as e:
        aa_chosen(["m/float32/pytorch/fast"], cs, {})
    assert "m/float32/pytorch/fast" in e.value.message
    assert "m/float32/contender/mica" in e.value.fix
