import subprocess
import sys

PROBE = """
import sys
before = set(sys.modules)
import tallyboard.monitor
new = sorted(set(sys.modules) - before)
print("\\n".join(new))
"""


def test_importing_monitor_loads_only_the_standard_library_and_itself():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    loaded = result.stdout.split()
    ours = [name for name in loaded if name.split(".")[0] == "tallyboard"]
    others = [name for name in loaded if name not in ours]
    assert "tallyboard.monitor.stat" in ours
    assert all(name == "tallyboard" or name.startswith("tallyboard.monitor") for name in ours), ours
    third_party = [name for name in others if name.split(".")[0] not in sys.stdlib_module_names]
    assert third_party == [], third_party
