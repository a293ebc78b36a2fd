"""What machine and software a run ran on, recorded with the run (`LogWriter.get_environment`).

Why: "it worked on the cluster, not here" is answered by comparing two runs' interpreters, GPUs,
driver versions and installed packages, which nobody writes down by hand. Only the standard library
is used; torch is asked about CUDA only if the program already imported it (importing it here
would cost seconds), and NVML only if nvidia-ml-py is installed.

Environment variables are an allowlist (names that describe the job: CUDA_VISIBLE_DEVICES,
SLURM_*, ...), and a name that looks like a credential (`SECRET_NAME`: KEY, TOKEN, SECRET,
PASSWORD, ... anywhere in it, any case) is dropped even when the allowlist would keep it, and a
URL's password is hidden in the values kept (`TALLYBOARD_URL=postgresql://me:***@db/results`):
a run's row is shown to everyone who can open the dashboard.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import socket
import sys
from typing import Any

from tallyboard.store.location import Location

ENV_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED", "WORLD_SIZE", "RANK", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CONDA_DEFAULT_ENV", "VIRTUAL_ENV",
})  # fmt: skip
ENV_PREFIXES = ("SLURM_", "PBS_", "LSB_", "SGE_", "TALLYBOARD_", "NCCL_", "TORCH_", "CUBLAS_", "CUDNN_")
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def allowed_variables(environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, str]:
    """The variables of `environ` the allowlist keeps, never one whose name matches `SECRET_NAME`,
    each shown as a location is (a URL without its password)."""
    return {
        name: str(Location(value))
        for name, value in sorted(environ.items())
        if (name in ENV_NAMES or name.startswith(ENV_PREFIXES)) and not SECRET_NAME.search(name)
    }


@functools.cache
def _packages() -> tuple[tuple[str, str], ...]:
    """Installed distributions (name, version), sorted; once per process (walking site-packages
    costs tens of milliseconds, and packages rarely change under a running program)."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(name, dist.version)
    return tuple(sorted(found.items(), key=lambda item: item[0].lower()))


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _gpus() -> dict[str, Any]:
    """GPU names and versions from torch (if imported) and NVML (if installed); {} when none."""
    gpu: dict[str, Any] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                count = torch.cuda.device_count()
                gpu.update(count=count, models=[torch.cuda.get_device_name(i) for i in range(count)])
            gpu["cuda"] = torch.version.cuda
            gpu["torch"] = torch.__version__
        except Exception:  # a broken CUDA setup must not stop the run from starting
            pass
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
            gpu.update(count=count, models=[n.decode() if isinstance(n, bytes) else n for n in names])
            driver = pynvml.nvmlSystemGetDriverVersion()
            gpu["driver"] = driver.decode() if isinstance(driver, bytes) else driver
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # not installed, or no NVIDIA driver: nothing to add
        pass
    return {key: value for key, value in gpu.items() if value is not None}


def capture(environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, Any]:
    """The environment of this process now, as a JSON-ready dict."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": {"model": _cpu_model(), "count": os.cpu_count()},
        "gpu": _gpus(),
        "packages": dict(_packages()),
        "env": allowed_variables(environ),
    }
