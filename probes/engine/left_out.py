"""Why an ok run stays out of statistics, in the reader's words: the flag and tooltip a
run's page and a runs table show, and the words a board's unranked reason counts with
(dashboard/queries/ranking.py). Which statistics a run enters is decided in
contract.counts_for_metric; this names the reasons, once."""

from __future__ import annotations

LEFT_OUT_WHY: dict[str, tuple[str, str]] = {
    "client_bound": (
        "client-bound",
        "Our own measuring loop lagged while reading this run, so our client may have set "
        "its figures: no statistic, rank or alert counts it.",
    ),
    "short_output": (
        "too short",
        "Fewer than MIN_SPEED_TOKENS output tokens: not counted for speed.",
    ),
    "stopped_short": (
        "stopped short",
        "Far below the workload's target length: not counted for speed.",
    ),
}


def left_out_why(*, client_bound: bool, short_output: bool, stopped_short: bool | None):
    """(flag, tooltip) for each LEFT_OUT_WHY reason that applies to a run, in that order."""
    flags = {"client_bound": client_bound, "short_output": short_output}
    flags["stopped_short"] = bool(stopped_short)
    return [LEFT_OUT_WHY[name] for name, applies in flags.items() if applies]
