"""The environment a run records: what describes the machine and the job, never a credential."""

from __future__ import annotations

import json
import platform
import sys

import pytest

import tallyboard as tb
from tallyboard.run import environment

SECRETS = {
    "MY_API_KEY": "sk-secret-1",
    "SLURM_JOB_TOKEN": "secret-2",  # allowlisted prefix, but a credential's name
    "HF_TOKEN": "secret-3",
    "SLURM_DB_PASSWORD": "secret-4",
    "tallyboard_secret_thing": "secret-5",  # any case
    "TORCH_Keyring": "secret-6",
    "CUDNN_PASSWD": "secret-7",
}
KEPT = {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_ID": "4242", "OMP_NUM_THREADS": "4"}
DROPPED = {"HOME_DIRECTORY_OF_SOMEONE": "/home/x", "PATH_EXTRA": "/opt"}  # not on the allowlist


def test_a_run_records_its_environment_and_no_secret(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, **KEPT, **DROPPED}.items():
        monkeypatch.setenv(name, value)
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("env", auto_log_plt=False) as run:
        pass
    recorded = table.get_environment(run.run_id)
    assert recorded == run.get_environment()
    assert recorded["python"] == platform.python_version()
    assert recorded["hostname"] and recorded["platform"] and recorded["cpu"]["count"] >= 1
    assert recorded["packages"]["pytest"] == pytest.__version__
    assert {name: recorded["env"][name] for name in KEPT} == KEPT
    stored = json.dumps(recorded)
    for name, value in {**SECRETS, **DROPPED}.items():
        assert name not in stored and value not in stored
    assert "gpu" in recorded  # {} without torch imported / NVML; counted when present
    table.close()


def test_environment_is_optional(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("no env", auto_log_plt=False, environment=False) as run:
        pass
    assert run.get_environment() is None
    table.close()


def test_gpu_facts_come_from_torch_only_when_it_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch  # imported once: importing torch a second time in one process fails

    monkeypatch.delitem(sys.modules, "torch")
    assert "torch" not in environment.capture()["gpu"]
    monkeypatch.setitem(sys.modules, "torch", torch)
    gpu = environment.capture()["gpu"]
    assert gpu["torch"] == torch.__version__
    if torch.cuda.is_available():
        assert gpu["count"] == torch.cuda.device_count()


def test_the_secret_patterns_win_over_the_allowlist() -> None:
    kept = environment.allowed_variables({**SECRETS, **KEPT, **DROPPED})
    assert kept == KEPT
