"""A dependency-free port of torch.monitor (filled in by the monitor work)."""
