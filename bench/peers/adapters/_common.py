"""What the adapters share: a timer that times nothing (for untimed writes), and workloads A and B
and C's untimed writer made from one `log(out, tags, vals, t)` that logs every tag at every step."""


class NoTimer:
    def start(self):
        pass

    def lap(self):
        pass

    def stop(self):
        pass


def scalar_workloads(log):
    """(workload_A, workload_B, prepare_C) of an adapter: A is B with one tag; C writes A untimed."""

    def workload_A(out, tag, vals, t):
        return log(out, [tag], vals, t)

    def prepare_C(out, tag, vals):
        return log(out, [tag], vals, NoTimer())

    return workload_A, log, prepare_C
