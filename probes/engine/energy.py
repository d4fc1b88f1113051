"""Energy over a run from a power source's counter (plain Python).

A DCGM exporter publishes ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, a counter of mJ per GPU
since boot; a Prometheus server answers an energy-counter expression (IPMI, Redfish or
node exporters) in joules. Two readings around a run give its joules; with the power
measured between runs (idle, unless other traffic ran), the joules above idle.

A counter that went down was reset (exporter or GPU restart) inside the window: the
run's energy is void (None, with ``reset`` noted), never a negative or a part taken for
the whole. A delta that implies more than MAX_WATTS per GPU is not a measurement and is
dropped the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from .servermetrics import Samples, series

DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
MAX_WATTS = 5000.0  # per GPU: above this a delta is a broken counter, not power


class SelectorError(ValueError):
    pass


def parse_selector(text: str) -> tuple[str, str] | None:
    """``gpu=0`` -> ("gpu", "0"); empty -> None (every GPU summed)."""
    text = (text or "").strip()
    if not text:
        return None
    label, sep, value = text.partition("=")
    label, value = label.strip(), value.strip().strip('"')
    if not sep or not label or not value or not label.replace("_", "").isalnum():
        raise SelectorError(f"a GPU selector is LABEL=VALUE, e.g. gpu=0, not {text[:40]!r}")
    return label, value


@dataclass(frozen=True)
class EnergyReading:
    joules: float  # the counter's value, in J
    devices: int  # GPUs (series) summed
    at_s: float  # when it was read (perf_counter seconds)


def dcgm_reading(samples: Samples, selector: tuple[str, str] | None, at_s: float):
    """The selected GPUs' energy counter in J, or None when the exporter has none."""
    found = series(samples, DCGM_ENERGY)
    if selector is not None:
        found = [(labels, v) for labels, v in found if labels.get(selector[0]) == selector[1]]
    if not found:
        return None
    return EnergyReading(sum(v for _, v in found) / 1e3, len(found), at_s)


@dataclass
class RunEnergy:
    energy_j: float | None = None
    reset: bool = False  # the counter went down inside the window


def delta_j(before: EnergyReading, after: EnergyReading) -> RunEnergy:
    """Joules between two readings; None after a counter reset or when absurd."""
    seconds = max(after.at_s - before.at_s, 1e-6)
    if after.joules < before.joules:
        return RunEnergy(None, reset=True)
    joules = after.joules - before.joules
    reset = False
    if joules / seconds > MAX_WATTS * max(before.devices, after.devices):
        return RunEnergy(None, reset)
    return RunEnergy(round(joules, 4), reset)


def per_token(
    energy_j: float | None,
    output_tokens: int | None,
    seconds: float,
    idle_w: float | None,
) -> dict[str, float | None]:
    """J per output token, output tokens per J, tok/s per W; the same above idle power."""
    out: dict[str, float | None] = {
        "energy_j_per_token": None,
        "output_tokens_per_j": None,
        "tps_per_w": None,
        "energy_above_idle_j": None,
        "output_tokens_per_j_above_idle": None,
    }
    if energy_j is None or not output_tokens or energy_j <= 0:
        return out
    out["energy_j_per_token"] = round(energy_j / output_tokens, 6)
    # tok/s per W = (tokens / s) / (J / s) = tokens per J: the same figure in the seeds'
    # unit; kept apart so alert rules and columns read either name.
    out["output_tokens_per_j"] = out["tps_per_w"] = round(output_tokens / energy_j, 6)
    if idle_w is not None and seconds > 0:
        above = energy_j - idle_w * seconds
        if above > 0:
            out["energy_above_idle_j"] = round(above, 4)
            out["output_tokens_per_j_above_idle"] = round(output_tokens / above, 6)
    return out
