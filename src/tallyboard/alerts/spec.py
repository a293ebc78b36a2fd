"""Rules written as text, for `tallyboard watch --rule` and config files:

    KIND:METRIC[:NAME=VALUE]...[:stop]

    nonfinite:train/loss
    threshold:train/loss:above=10
    noimprovement:val/loss:patience=500:mode=min
    stalled:train/loss:window=200:min_change=0.001
    behind:val/acc:mode=max:alpha=0.01                (the best finished run; leader=3 or 3,4,5)

`stop` makes the rule ask the run to stop. Values are read as numbers where the rule's argument
is a number; an unknown kind or argument is an error that names what is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tallyboard.alerts.behind_leader import BehindLeader
from tallyboard.alerts.rules import NoImprovement, NonFinite, Rule, Stalled, Threshold


def _leader(text: str) -> int | list[int]:
    runs = [int(part) for part in text.split(",")]
    return runs[0] if len(runs) == 1 else runs


# kind -> (class, {argument: conversion})
KINDS: dict[str, tuple[Callable[..., Rule], dict[str, Callable[[str], Any]]]] = {
    "nonfinite": (NonFinite, {}),
    "threshold": (Threshold, {"above": float, "below": float}),
    "noimprovement": (NoImprovement, {"patience": int, "mode": str, "min_delta": float}),
    "stalled": (Stalled, {"window": int, "min_change": float}),
    "behind": (BehindLeader, {"leader": _leader, "mode": str, "alpha": float, "margin": float,
                              "spacing": float, "min_repetitions": int}),
}  # fmt: skip


def parse_rule(text: str) -> Rule:
    """The rule that `text` describes (see the module's doc); ValueError says what is wrong."""
    kind, _, rest = text.partition(":")
    if kind not in KINDS:
        raise ValueError(f"rule {text!r}: unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    make, accepted = KINDS[kind]
    metric, *parts = rest.split(":")
    if not metric:
        raise ValueError(f"rule {text!r}: say which metric, as {kind}:METRIC")
    arguments: dict[str, Any] = {}
    for part in parts:
        if part == "stop":
            arguments["stop"] = True
            continue
        name, equals, value = part.partition("=")
        if not equals or name not in accepted:
            names = ", ".join(f"{n}=" for n in accepted) or "none"
            raise ValueError(f"rule {text!r}: unknown argument {part!r} (accepted: {names}, stop)")
        try:
            arguments[name] = accepted[name](value)
        except ValueError:
            raise ValueError(f"rule {text!r}: {name}={value!r} is not a valid value") from None
    try:
        return make(metric, **arguments)
    except TypeError as error:
        raise ValueError(f"rule {text!r}: {error}") from None
