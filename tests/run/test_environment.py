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


def test_packages_are_read_from_the_folder_names_on_sys_path(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in ("Foo_Bar-1.2.dist-info", "zope.interface-6.0.dist-info", "old_pkg-0.3-py3.11.egg-info"):
        (first / folder).mkdir(parents=True)  # empty: no METADATA is read
    (first / "dev.egg-info").mkdir()
    (first / "dev.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: dev\nVersion: 0.0.dev1\n\nbody\n"
    )
    (first / "not_a_package-1.0.txt").write_text("")
    (second / "foo-bar-9.9.dist-info").mkdir(parents=True)  # shadowed, as its import would be
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    environment._packages.cache_clear()
    try:
        packages = environment.capture()["packages"]
    finally:
        environment._packages.cache_clear()
    assert packages == {"dev": "0.0.dev1", "foo-bar": "1.2", "old-pkg": "0.3", "zope-interface": "6.0"}
