import operator

from tallyboard import monitor
from tallyboard.monitor import Aggregation


def test_members_names_and_torch_values():
    assert [(a.name, a.value) for a in Aggregation] == [
        ("VALUE", 0),
        ("MEAN", 2),
        ("COUNT", 3),
        ("SUM", 4),
        ("MAX", 5),
        ("MIN", 6),
    ]
    assert int(Aggregation.SUM) == 4


def test_members_are_hashable_dict_keys():
    table = {Aggregation.MEAN: 1.0, Aggregation.MAX: 2.0}
    assert table[Aggregation.MEAN] == 1.0
    assert len({Aggregation.MIN, Aggregation.MIN, Aggregation.MAX}) == 2


def test_members_are_exported_at_module_level():
    assert (monitor.VALUE, monitor.MEAN, monitor.COUNT) == (
        Aggregation.VALUE,
        Aggregation.MEAN,
        Aggregation.COUNT,
    )
    assert (monitor.SUM, monitor.MAX, monitor.MIN) == (Aggregation.SUM, Aggregation.MAX, Aggregation.MIN)


def test_members_are_indexes_as_torchs_are():
    assert operator.index(Aggregation.MEAN) == 2
    assert (int(Aggregation.SUM), float(Aggregation.MIN)) == (4, 6.0)
    assert ["value", "none", "mean", "count"][Aggregation.COUNT] == "count"
