import subprocess
import sys

PROBE = """
import sys
before = set(sys.modules)
import tallyboard.monitor as monitor
from datetime import date, timedelta
# converting like torch's binding needs nothing more: numpy's objects are duck-typed
monitor.Event(b"e", date(2024, 5, 1), {b"k": b"v", "i": 1, "f": 0.5, "b": True})
with monitor.Stat(b"s", [monitor.Aggregation.MIN, monitor.Aggregation.SUM], timedelta(seconds=1)) as stat:
    stat.add(float("nan"))
    stat.add(1)
new = sorted(set(sys.modules) - before)
print("\\n".join(new))
"""


def test_importing_and_using_monitor_loads_only_the_standard_library_and_itself():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    loaded = result.stdout.split()
    ours = [name for name in loaded if name.split(".")[0] == "tallyboard"]
    others = [name for name in loaded if name not in ours]
    assert "tallyboard.monitor.stat" in ours
    assert all(name == "tallyboard" or name.startswith("tallyboard.monitor") for name in ours), ours
    third_party = [name for name in others if name.split(".")[0] not in sys.stdlib_module_names]
    assert third_party == [], third_party
