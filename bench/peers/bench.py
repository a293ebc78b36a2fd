#!/usr/bin/env python3
"""Side-by-side scalar-logging benchmark of Python experiment trackers.

Every (adapter, workload, repetition) runs in a fresh subprocess (worker.py) so memory and
import state are separate; libraries are interleaved (the adapter order rotates every
repetition) because the machine is small and shared. Results go to <work>/results.jsonl and a
markdown report.

    python bench.py                       # full run, 3 reps, all adapters
    python bench.py --only aim,trackio --workloads A,C --reps 1
    python bench.py --scale 0.01 --reps 1 # smoke test (n scaled down)
    python bench.py --report-only RUN_DIR/results.jsonl --md out.md

Workloads: A = 1 tag x N (200k) steps; B = 20 tags x 10k steps; C = read back one tag of 200k
points in a fresh process (written beforehand by the adapter's prepare_C, untimed);
D = create run + first log + close, 20 times, median ms.
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from adapters import ADAPTERS  # noqa: E402

N_A = 200_000
B_TAGS = 20
B_STEPS = 10_000
N_C = 200_000
N_D = 20
N_K = 10_000  # K: scalars logged before the SIGKILL
REF = "sqlite_executemany"


def adapter_info(name):
    mod = importlib.import_module(f"adapters.{name}")
    pkg = getattr(mod, "PACKAGE", None)
    ver = ""
    if pkg:
        try:
            ver = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            ver = "not installed"
    else:
        import sqlite3

        ver = (
            f"sqlite {sqlite3.sqlite_version}"
            if name.startswith("sqlite")
            else f"py {sys.version.split()[0]}"
        )
    readers = getattr(mod, "READERS", None)
    if readers is None:
        readers = {"default": None} if hasattr(mod, "read_C") else {}
    has = {
        "A": hasattr(mod, "workload_A"),
        "B": hasattr(mod, "workload_B"),
        "C": hasattr(mod, "prepare_C") and bool(readers),
        "D": hasattr(mod, "start_run_D"),
        "K": hasattr(mod, "workload_A") and (hasattr(mod, "read_C") or hasattr(mod, "read_after_crash")),
    }
    return {
        "name": name,
        "label": getattr(mod, "LABEL", name),
        "package": pkg,
        "version": ver,
        "max_n": getattr(mod, "MAX_N", {}),
        "readers": list(readers.keys()),
        "has": has,
        "doc": (mod.__doc__ or "").strip(),
    }


def child_env(work, out):
    env = dict(os.environ)
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    env.update(
        {
            "HOME": home,  # keep library caches/configs out of the real home
            "PYTHONDONTWRITEBYTECODE": "1",
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            "WANDB_DISABLE_GIT": "true",
            "WANDB_CONSOLE": "off",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
            "DVC_NO_ANALYTICS": "1",
            "ITERATIVE_DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "GRADIO_ANALYTICS_ENABLED": "False",
            "TRACKIO_DIR": os.path.join(out, "trackio"),
            "AIM_UI_TELEMETRY_ENABLED": "0",
            "TQDM_DISABLE": "1",
        }
    )
    return env


def run_worker(py, work, adapter, workload, n, out, reader=None, timeout=600, log=None):
    os.makedirs(out, exist_ok=True)
    cmd = [
        py,
        os.path.join(HERE, "worker.py"),
        "--adapter",
        adapter,
        "--workload",
        workload,
        "--n",
        str(n),
        "--out",
        out,
    ]
    if reader and reader != "default":
        cmd += ["--reader", reader]
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        cwd=out,
        env=child_env(work, out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    ps = psutil.Process(p.pid)
    peak = 0
    # sample the RSS of the whole process tree (wandb-core etc. are separate processes)
    import threading

    stop = threading.Event()

    def sampler():
        nonlocal peak
        while not stop.is_set():
            try:
                procs = [ps, *ps.children(recursive=True)]
                tot = 0
                for q in procs:
                    with contextlib.suppress(psutil.Error):
                        tot += q.memory_info().rss
                peak = max(peak, tot)
            except psutil.Error:
                pass
            stop.wait(0.05)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    try:
        so, se = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        so, se = p.communicate()
        rc = "timeout"
    stop.set()
    th.join()
    # reap anything the library left running in its session (e.g. a service process)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, 9)
    wall = time.perf_counter() - t0
    res = None
    for line in so.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    if res is None:
        res = {
            "adapter": adapter,
            "workload": workload,
            "error": f"rc={rc}",
            "stderr_tail": se[-3000:],
            "stdout_tail": so[-1000:],
        }
    res["tree_peak_rss_kb"] = peak // 1024
    res["wall_s"] = wall
    res["rc"] = rc
    if log is not None and se.strip():
        with open(log, "a") as f:
            f.write(f"==== {adapter} {workload} {reader or ''}\n{se[-4000:]}\n")
    return res


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="interpreter of the venv holding the libraries")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--only", default="", help="comma list of adapters (default: all in adapters/__init__.py)"
    )
    ap.add_argument("--skip", default="", help="comma list of adapters to skip")
    ap.add_argument("--workloads", default="A,B,C,D,K")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply all n (smoke tests)")
    ap.add_argument(
        "--work", default=None, help="scratch dir (default: a new folder under the system temp dir)"
    )
    ap.add_argument("--md", default=None, help="write markdown report here")
    ap.add_argument("--keep", action="store_true", help="keep the data each run wrote")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--report-only", default=None, help="results.jsonl to summarise; no runs")
    a = ap.parse_args()

    if a.report_only:
        rows = read_jsonl(a.report_only)
        ad_json = os.path.join(os.path.dirname(os.path.abspath(a.report_only)), "adapters.json")
        infos = json.loads(Path(ad_json).read_text()) if os.path.exists(ad_json) else None
        md = report(rows, infos)
        if a.md:
            Path(a.md).write_text(md)
        print(md)
        return

    names = [x for x in (a.only.split(",") if a.only else ADAPTERS) if x]
    names = [x for x in names if x not in a.skip.split(",")]
    infos = {n: adapter_info(n) for n in names}
    work = a.work or os.path.join(tempfile.gettempdir(), f"peers-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    os.makedirs(work, exist_ok=True)
    results_path = os.path.join(work, "results.jsonl")
    errlog = os.path.join(work, "stderr.log")
    wls = a.workloads.split(",")
    print(f"work dir: {work}", flush=True)
    with open(os.path.join(work, "adapters.json"), "w") as f:
        json.dump(infos, f, indent=1)

    def emit(res):
        with open(results_path, "a") as f:
            f.write(json.dumps(res) + "\n")
        n = res.get("n")
        tot = res.get("total_s")
        extra = ""
        if res.get("workload") in ("A", "B") and tot:
            extra = f"{n / tot:,.0f}/s (loop {res['loop_s']:.2f}s close {res['close_s']:.2f}s)"
        elif res.get("workload") == "C" and tot is not None:
            extra = f"read {tot:.3f}s n={n}"
        elif res.get("workload") == "Kread" and "error" not in res:
            extra = f"survived SIGKILL: {res['n']}/{res['expected_n']} {res.get('read_error', '')}"
        elif res.get("workload") == "D" and res.get("d_ms"):
            extra = f"median {statistics.median(res['d_ms']):.1f} ms"
        err = res.get("error", "")
        print(
            f"  {res.get('adapter'):24s} {res.get('workload'):5s} {res.get('reader') or '':16s} "
            f"{extra} peak {res.get('tree_peak_rss_kb', 0) / 1024:.0f}MB wall {res['wall_s']:.1f}s {err}",
            flush=True,
        )

    for rep in range(a.reps):
        for wl in wls:
            k = rep % len(names)
            order = names[k:] + names[:k]  # rotate so no library always runs first/last
            print(f"rep {rep + 1}/{a.reps} workload {wl}", flush=True)
            for name in order:
                info = infos[name]
                if not info["has"].get(wl):
                    continue
                out = os.path.join(work, "data", f"{name}-{wl}-{rep}")
                if wl in ("A", "B"):
                    full = N_A if wl == "A" else B_STEPS
                    n = int(min(full, info["max_n"].get(wl, full)) * a.scale) or 1
                    res = run_worker(a.python, work, name, wl, n, out, timeout=a.timeout, log=errlog)
                    res.update(rep=rep, full_n=int(full * a.scale) * (B_TAGS if wl == "B" else 1))
                    emit(res)
                elif wl == "C":
                    n = max(1, int(N_C * a.scale))
                    prep = run_worker(a.python, work, name, "Cprep", n, out, timeout=a.timeout, log=errlog)
                    prep.update(rep=rep)
                    emit(prep)
                    if "error" in prep:
                        continue
                    for reader in info["readers"]:
                        res = run_worker(
                            a.python, work, name, "C", n, out, reader=reader, timeout=a.timeout, log=errlog
                        )
                        res.update(rep=rep, reader=reader)
                        emit(res)
                elif wl == "K":
                    n = max(1, int(N_K * a.scale))
                    killed = run_worker(a.python, work, name, "K", n, out, timeout=a.timeout, log=errlog)
                    res = run_worker(a.python, work, name, "Kread", n, out, timeout=a.timeout, log=errlog)
                    res.update(rep=rep, killed_rc=killed["rc"])
                    emit(res)
                elif wl == "D":
                    res = run_worker(a.python, work, name, "D", N_D, out, timeout=a.timeout, log=errlog)
                    res.update(rep=rep)
                    emit(res)
                if not a.keep:
                    shutil.rmtree(out, ignore_errors=True)

    rows = read_jsonl(results_path)
    md = report(rows, infos)
    md_path = a.md or os.path.join(work, "report.md")
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    print(f"results: {results_path}\nreport: {md_path}")


# ---------------------------------------------------------------------------------------- report
def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarise(rows):
    """-> {adapter: {metric: median}} over repetitions."""
    by = {}
    for r in rows:
        if "error" in r and r.get("workload") != "C":
            by.setdefault(r["adapter"], {}).setdefault("errors", []).append(f"{r['workload']}: {r['error']}")
            continue
        by.setdefault(r["adapter"], {}).setdefault((r["workload"], r.get("reader")), []).append(r)
    out = {}
    for ad, d in by.items():
        s = {"errors": d.get("errors", [])}
        for key, rs in d.items():
            if key == "errors":
                continue
            wl, reader = key
            if wl in ("A", "B"):
                s[f"{wl}_rate"] = _med([r["n"] / r["total_s"] for r in rs])
                s[f"{wl}_loop_rate"] = _med([r["n"] / r["loop_s"] if r["loop_s"] > 0 else None for r in rs])
                s[f"{wl}_close_s"] = _med([r["close_s"] for r in rs])
                s[f"{wl}_n"] = rs[0]["n"]
                s[f"{wl}_full_n"] = rs[0].get("full_n", rs[0]["n"])
                s[f"{wl}_peak_mb"] = _med([max(r["tree_peak_rss_kb"], r["rss_self_kb"]) / 1024 for r in rs])
                s[f"{wl}_self_mb"] = _med([r["rss_self_kb"] / 1024 for r in rs])
                s[f"{wl}_growth_mb"] = _med([(r["rss_self_kb"] - r["rss_base_kb"]) / 1024 for r in rs])
                s[f"{wl}_bps"] = _med([r["disk_bytes"] / r["n"] for r in rs])
                s[f"{wl}_reps"] = len(rs)
            elif wl == "C":
                ok = [r for r in rs if "error" not in r]
                if ok:
                    s.setdefault("C", {})[reader or "default"] = (
                        _med([r["total_s"] for r in ok]),
                        len(ok),
                        _med([max(r["tree_peak_rss_kb"], r["rss_self_kb"]) / 1024 for r in ok]),
                    )
                else:
                    s["errors"].append(f"C[{reader}]: {rs[0]['error']}")
            elif wl == "Cprep":
                s["Cprep_s"] = _med([r["total_s"] for r in rs])
            elif wl == "Kread":
                s["K_survived"] = min(r["n"] / r["expected_n"] for r in rs)  # the worst repetition
            elif wl == "D":
                s["D_ms"] = _med([statistics.median(r["d_ms"]) for r in rs])
                s["D_first_ms"] = _med([r["d_ms"][0] for r in rs])
            s.setdefault("import_s", [])
            s["import_s"] += [r.get("import_s") for r in rs]
        s["import_s"] = _med(s.get("import_s", []))
        out[ad] = s
    return out


def _f(x, fmt):
    return "–" if x is None else format(x, fmt)


def report(rows, infos=None):
    infos = infos or {}
    S = summarise(rows)
    order = [n for n in ADAPTERS if n in S] + [n for n in S if n not in ADAPTERS]
    ref = S.get(REF, {})

    def ratio(v, r, inverse=False):
        if v is None or not r:
            return "–"
        x = (r / v) if inverse else (v / r)
        return f"{x:.3g}×"

    L = []
    L.append(
        f"Medians over repetitions. (×ref) = value / value of `{REF}`: for throughput below 1× is slower, "
        "for times (C, D) above 1× is slower. [n=...] = scalars actually logged when the library was too "
        "slow for 200k (throughput is per second, so it is quoted as is). A peak RSS = peak summed RSS "
        "of the worker's process tree (sampled every 50 ms) or the worker's own ru_maxrss, whichever is "
        "larger; growth = the worker's "
        "ru_maxrss at the end minus at the start of the timed region. bytes/scalar = all files the library "
        "wrote for the run / n."
    )
    L.append("")
    L.append(
        "| library | version | A scalars/s (×ref) | B scalars/s (×ref) | A peak RSS MB (growth) "
        "| bytes/scalar A | C read 200k s (×ref) | D run start ms median (×ref) | K survives SIGKILL "
        "| import s |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for ad in order:
        s = S[ad]
        info = infos.get(ad) or {}
        lab = info.get("label", ad)
        ver = info.get("version", "")
        a_note = "" if s.get("A_n") == s.get("A_full_n") or s.get("A_n") is None else f" [n={s['A_n']:,}]"
        b_note = "" if s.get("B_n") == s.get("B_full_n") or s.get("B_n") is None else f" [n={s['B_n']:,}]"
        c = s.get("C", {})
        ref_c = (ref.get("C") or {}).get("default", (None,))[0]
        c_txt = (
            "; ".join(
                f"{_f(v[0], '.3f')} ({ratio(v[0], ref_c)}){'' if k == 'default' else ' ' + k}"
                for k, v in c.items()
            )
            or "–"
        )
        L.append(
            "| "
            + " | ".join(
                [
                    lab,
                    ver,
                    f"{_f(s.get('A_rate'), ',.0f')} ({ratio(s.get('A_rate'), ref.get('A_rate'))}){a_note}"
                    if s.get("A_rate")
                    else "–",
                    f"{_f(s.get('B_rate'), ',.0f')} ({ratio(s.get('B_rate'), ref.get('B_rate'))}){b_note}"
                    if s.get("B_rate")
                    else "–",
                    f"{_f(s.get('A_peak_mb'), '.0f')} (+{_f(s.get('A_growth_mb'), '.0f')})"
                    if s.get("A_peak_mb")
                    else "–",
                    _f(s.get("A_bps"), ".1f") if s.get("A_bps") is not None else "–",
                    c_txt,
                    f"{_f(s.get('D_ms'), '.1f')} ({ratio(s.get('D_ms'), ref.get('D_ms'))})"
                    if s.get("D_ms") is not None
                    else "–",
                    f"{s['K_survived']:.1%}" if s.get("K_survived") is not None else "–",
                    _f(s.get("import_s"), ".2f"),
                ]
            )
            + " |"
        )
    L.append("")
    L.append("Detail (medians over repetitions):")
    L.append("")
    L.append(
        "| adapter | A loop-only/s | A close s | A reps | B loop-only/s | B close s | B peak RSS MB "
        "| bytes/scalar B | C peak RSS MB | D first-run ms | errors |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for ad in order:
        s = S[ad]
        c = s.get("C", {})
        L.append(
            "| "
            + " | ".join(
                [
                    ad,
                    _f(s.get("A_loop_rate"), ",.0f"),
                    _f(s.get("A_close_s"), ".3f"),
                    str(s.get("A_reps", "–")),
                    _f(s.get("B_loop_rate"), ",.0f"),
                    _f(s.get("B_close_s"), ".3f"),
                    _f(s.get("B_peak_mb"), ".0f"),
                    _f(s.get("B_bps"), ".1f"),
                    "; ".join(f"{_f(v[2], '.0f')}" for v in c.values()) or "–",
                    _f(s.get("D_first_ms"), ".1f"),
                    "; ".join(sorted(set(s.get("errors", []))))[:300] or "",
                ]
            )
            + " |"
        )
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    main()
