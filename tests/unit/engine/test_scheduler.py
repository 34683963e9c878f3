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
