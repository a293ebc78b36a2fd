"""A bounded mutation sample of the sink's timing rules: each mutant breaks one rule of
src/tallyboard/run/sink.py, and tests/run/test_sink_rules.py must fail on every one of them.
Run from the repository root with the test venv's python; prints KILLED or SURVIVED per mutant and
exits 1 if any survived. The file is restored whatever happens."""

import os
import subprocess
import sys

p = "src/tallyboard/run/sink.py"
orig = open(p).read()
mutants = [
    ("held + queue.pace", "held + 1"),
    ("2 * base if base", "base + 1 if base"),
    ('wait = wait and kind != "results"', "wait = wait"),
    ("and self._queued_bytes\n                and", "and"),
    ("self._streak = 0\n", "pass\n"),
    ("self._rate = min(size / seconds, self._rate * RATE_STEP)", "self._rate = size / seconds"),
    ("if size >= 1000 and", "if"),
    ("if now - self._reported >= REPORT_EVERY:", "if True:"),
    ("elif now - self._unwritable_since >= GIVE_UP_AFTER:", "elif True:"),
    ("            self._unwritable_since = None\n", "            pass\n"),
    ("max(MIN_BUDGET_ROWS, int(self._rate * COMMIT_BUDGET))", "int(self._rate * COMMIT_BUDGET)"),
    ("return max(1, min(by_bytes", "return max(0, min(by_bytes"),
    (
        "min(MAX_BACKOFF, self.commit_interval * 2.0 ** min(self._streak, 6))",
        "self.commit_interval * 2.0 ** min(self._streak, 6)",
    ),
    ("idle = self._clock() - self._idle_since >= self.idle_stop", "idle = True"),
    ("if self._failures > failures and self._clock() >= deadline:", "if self._clock() >= deadline + 1:"),
    ("queue.pace = len(chunk)", "pass"),
]
survived = 0
try:
    for a, b in mutants:
        assert a in orig, a
        open(p, "w").write(orig.replace(a, b, 1))
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-n",
                "0",
                "-x",
                "-q",
                "tests/run/test_sink_rules.py",
                "--timeout",
                "60",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": "src"},
        )
        survived += r.returncode == 0
        print("KILLED" if r.returncode else "SURVIVED", repr(a[:60]))
finally:
    open(p, "w").write(orig)
print(f"{len(mutants) - survived} of {len(mutants)} mutants killed")
sys.exit(1 if survived else 0)
