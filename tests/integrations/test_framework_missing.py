"""Without its framework, an integration fails at import with a message that says what to install."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("framework", ["lightning", "transformers", "keras"])
def test_a_missing_framework_is_a_clear_import_error(framework):
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        "try:\n"
        f"    import tallyboard.integrations.{framework}\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"needs '{framework}" in output.stdout
    assert "pip install 'tallyboard[integrations]'" in output.stdout
