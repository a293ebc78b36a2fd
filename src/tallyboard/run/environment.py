"""What machine and software a run ran on, recorded with the run (`LogWriter.get_environment`).

Why: "it worked on the cluster, not here" is answered by comparing two runs' interpreters, GPUs,
driver versions and installed packages, which nobody writes down by hand. Only the standard library
is used; torch is asked about CUDA only if the program already imported it (importing it here
would cost seconds), and NVML only if nvidia-ml-py is installed. What cannot change while the
process lives (the packages, the CPU, NVML's GPUs) is read once per process.

Environment variables are an allowlist (names that describe the job: CUDA_VISIBLE_DEVICES,
SLURM_*, ...), and a name that looks like a credential (`SECRET_NAME`: KEY, TOKEN, SECRET,
PASSWORD, ... anywhere in it, any case) is dropped even when the allowlist would keep it, and a
URL's password is hidden in the values kept (`TALLYBOARD_URL=postgresql://me:***@db/results`):
a run's row is shown to everyone who can open the dashboard.
"""

from __future__ import annotations

import functools
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


# `name-version.dist-info` (wheels: PEP 427), `name-version[-pyX.Y].egg-info` (setuptools);
# `name.egg-info` (a source tree installed in development mode) names no version.
_DISTRIBUTION = re.compile(r"(?P<name>.+?)(?:-(?P<version>\d[^-]*)(?:-py\d[^-]*)?)?\.(?:dist|egg)-info")


@functools.cache
def _packages() -> tuple[tuple[str, str], ...]:
    """Installed distributions (name, version), sorted, read from the names of the `*.dist-info`
    and `*.egg-info` folders on `sys.path` (the first of a name wins, as imports do), not from their
    METADATA: parsing every one took 60-160 ms a process (seconds under load) for what the folder
    names say. Names are canonical (PEP 503: lower case, `-` for runs of `-_.`), as installers
    compare them. Once per process: packages rarely change under a running program."""
    found: dict[str, str] = {}
    for folder in sys.path:
        try:
            entries = sorted(entry.name for entry in os.scandir(folder or "."))
        except OSError:  # not a folder (a zip file), or gone
            continue
        for entry in entries:
            match = _DISTRIBUTION.fullmatch(entry)
            if match is None:
                continue
            name = re.sub(r"[-_.]+", "-", match["name"]).lower()
            version = match["version"] or _version_inside(os.path.join(folder or ".", entry))
            if version:
                found.setdefault(name, version)
    return tuple(sorted(found.items()))


def _version_inside(egg_info: str) -> str | None:
    """The `Version:` header of an `*.egg-info` folder whose name has none (its first lines)."""
    try:
        with open(os.path.join(egg_info, "PKG-INFO"), encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():  # the headers end at the first empty line
                    break
    except OSError:
        pass
    return None


@functools.cache
def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


@functools.cache
def _cpu_count() -> int | None:
    return os.cpu_count()  # it reads /sys: a fraction of a millisecond, at every run start


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
    gpu.update(_nvml())
    return {key: value for key, value in gpu.items() if value is not None}


@functools.cache
def _nvml() -> dict[str, Any]:
    """The GPUs and driver NVML reports; once per process (the hardware stays). Not even imported
    on a Linux machine without NVIDIA's driver loaded: importing nvidia-ml-py alone costs 60 ms."""
    if sys.platform.startswith("linux") and not os.path.exists("/proc/driver/nvidia/version"):
        return {}
    facts: dict[str, Any] = {}
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
            facts.update(count=count, models=[n.decode() if isinstance(n, bytes) else n for n in names])
            driver = pynvml.nvmlSystemGetDriverVersion()
            facts["driver"] = driver.decode() if isinstance(driver, bytes) else driver
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # not installed, or no NVIDIA driver: nothing (more) to add
        pass
    return facts


def capture(environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, Any]:
    """The environment of this process now, as a JSON-ready dict."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": {"model": _cpu_model(), "count": _cpu_count()},
        "gpu": _gpus(),
        "packages": dict(_packages()),
        "env": allowed_variables(environ),
    }
