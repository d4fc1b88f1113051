"""Replay an alert rule over stored history and print every state change it would have made.

    python manage.py backtest_alerts --rule 3 --days 30 --json
    python manage.py backtest_alerts --metric output_tps --regression-pct 10 --days 90 --json \\
        --injected changes.json       # from generate_history --changes-out

One JSON object per state change, then a summary object (with recall, minutes to
detection and false alarms per 1,000 evaluations when --injected names the known slowdowns).
Raw runs are read where they are kept; older hours come from hourly rollups, whose
histograms stand in for the runs (spread over their hour).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django.utils import timezone

from dashboard import histogram
from dashboard.alerts import decide
from dashboard.alerts.models import METRIC_LABELS, SAME_HOURS, AlertRule
from dashboard.alerts.replay import Injected, Series, Windows, replay, score
from dashboard.alerts.samples import ERROR_STATUSES, usable_runs
from dashboard.alerts.schedule import EVALUATE_EVERY_S
from dashboard.models import RunRollup
from probes.models import ProbeRun, Workload

SeriesKey = tuple[int, int, str]


class Command(BaseCommand):
    help = "Replay an alert rule over stored runs and rollups; JSON lines per state change."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--rule", type=int, help="An existing rule's id.")
        parser.add_argument("--metric", choices=sorted(decide.METRICS - {"minutes_since_ok"}))
        parser.add_argument(
            "--regression-pct", type=float, help="Fire past this %% worse."
        )  # argparse formats help: %% is a %
        parser.add_argument("--threshold", type=float, help="Or: an absolute threshold.")
        parser.add_argument("--recent-min", type=int, default=45)
        parser.add_argument("--baseline-h", type=int, default=24)
        parser.add_argument(
            "--baseline",
            choices=["preceding", SAME_HOURS],
            default="preceding",
            help="same_hours: the same time of day on the previous 7 days.",
        )
        parser.add_argument("--min-samples", type=int, default=3)
        parser.add_argument("--min-baseline-samples", type=int, default=40)
        parser.add_argument("--max-p", type=float, default=0.005)
        parser.add_argument("--for-min", type=int, default=0)
        parser.add_argument("--endpoint", type=int, action="append", help="Only these.")
        parser.add_argument("--days", type=int, required=True, help="Replay the last N days.")
        parser.add_argument("--end", type=datetime.fromisoformat, help="Default: now.")
        parser.add_argument("--cadence-s", type=float, default=EVALUATE_EVERY_S)
        parser.add_argument("--injected", type=Path, help="generate_history --changes-out.")
        parser.add_argument("--json", action="store_true", help="JSON lines (the only format).")

    def handle(self, *args, **options) -> None:
        if options["days"] < 1:
            raise CommandError("--days must be at least 1.")
        condition, timing, windows, scope, metric = self._rule(options)
        end = options["end"] or timezone.now()
        if timezone.is_naive(end):
            end = timezone.make_aware(end, UTC)
        start = end - timedelta(days=options["days"])
        history_start = start - (
            timedelta(days=8) if windows.same_hours else windows.baseline + windows.recent
        )
        if options["endpoint"]:
            scope &= Q(endpoint_id__in=options["endpoint"])
        series = load_series(scope, metric, history_start, end)
        injected = load_injected(options["injected"], windows) if options["injected"] else None
        slugs = dict(Workload.objects.values_list("pk", "slug"))
        cadence = timedelta(seconds=options["cadence_s"])

        replays, changes = [], 0
        for key in sorted(series):
            result = replay(series[key], condition, timing, windows, start, end, cadence)
            endpoint_id, workload_id, region = key
            for change in result.changes:
                changes += 1
                line = {
                    "endpoint": endpoint_id,
                    "workload": slugs.get(workload_id),
                    "region": region,
                }
                self.stdout.write(json.dumps(line | change.as_dict()))
            # Only slowdowns that began inside the replayed period can be caught in it.
            known = [c for c in (injected or {}).get(endpoint_id, []) if start <= c.start < end]
            replays.append((result, known))
        summary = {
            "summary": {
                "metric": metric,
                "metric_label": METRIC_LABELS.get(metric, metric),
                "from": start.isoformat(),
                "to": end.isoformat(),
                "series": len(series),
                "state_changes": changes,
                "evaluations": sum(r.evaluations for r, _ in replays),
            }
        }
        if injected is not None:
            summary["summary"] |= score(replays, windows.recent + timedelta(minutes=15))
        self.stdout.write(json.dumps(summary))

    def _rule(self, options):
        if options["rule"]:
            rule = AlertRule.objects.filter(pk=options["rule"]).first()
            if rule is None:
                raise CommandError(f"No alert rule {options['rule']}.")
            if rule.metric == "minutes_since_ok":
                raise CommandError("Staleness rules cannot be replayed (they watch absence).")
            windows = Windows(
                rule.recent_window, rule.baseline_window, rule.baseline_mode == SAME_HOURS
            )
            return rule.as_condition(), rule.as_timing(), windows, rule.runs_filter(), rule.metric
        metric = options["metric"]
        if not metric:
            raise CommandError("Give --rule ID, or --metric with --regression-pct or --threshold.")
        kind = decide.THRESHOLD if options["threshold"] is not None else decide.REGRESSION
        try:
            condition = decide.Condition(
                metric=metric,
                kind=kind,
                min_samples=options["min_samples"],
                min_baseline_samples=options["min_baseline_samples"],
                regression_pct=options["regression_pct"],
                threshold=options["threshold"],
                max_p_value=options["max_p"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        windows = Windows(
            timedelta(minutes=options["recent_min"]),
            timedelta(hours=options["baseline_h"]),
            options["baseline"] == SAME_HOURS,
        )
        timing = decide.Timing(pending_for=timedelta(minutes=options["for_min"]))
        return condition, timing, windows, Q(), metric


def load_series(scope: Q, metric: str, start: datetime, end: datetime) -> dict[SeriesKey, Series]:
    """Every series' samples in [start, end): raw runs, and rollup hours where the raw
    runs are gone (pruned)."""
    times: dict[SeriesKey, list[float]] = defaultdict(list)
    values: dict[SeriesKey, list[float]] = defaultdict(list)
    raw_hours: set[tuple[SeriesKey, datetime]] = set()
    # A run group counts once, by its summary row (as the evaluator and rollups count it).
    runs = ProbeRun.objects.filter(scope, started_at__gte=start, started_at__lt=end).exclude(
        role="step"
    )
    if metric == "success_rate":
        rows = runs.values_list("endpoint_id", "workload_id", "region", "started_at", "status")
        convert = lambda status: 1.0 if status == "ok" else 0.0  # noqa: E731
    elif metric == "error_rate":
        rows = runs.values_list("endpoint_id", "workload_id", "region", "started_at", "status")
        convert = lambda status: 1.0 if status in ERROR_STATUSES else 0.0  # noqa: E731
    else:
        rows = runs.filter(usable_runs(metric)).values_list(
            "endpoint_id", "workload_id", "region", "started_at", metric
        )
        convert = float
    for endpoint_id, workload_id, region, at, value in rows.iterator(chunk_size=20_000):
        key = (endpoint_id, workload_id, region)
        times[key].append(at.timestamp())
        values[key].append(convert(value))
        raw_hours.add((key, at.replace(minute=0, second=0, microsecond=0)))
    if metric not in ("success_rate", "error_rate"):
        rollups = RunRollup.objects.filter(
            scope, granularity=RunRollup.HOUR, bucket_start__gte=start, bucket_start__lt=end
        ).values_list("endpoint_id", "workload_id", "region", "bucket_start", f"hist_{metric}")
        for endpoint_id, workload_id, region, hour, hist in rollups.iterator(chunk_size=5_000):
            key = (endpoint_id, workload_id, region)
            if (key, hour) in raw_hours or not hist:
                continue
            samples = [
                histogram.bucket_value(int(bucket)) for bucket, n in hist.items() for _ in range(n)
            ]
            for i, value in enumerate(samples):  # spread evenly over their hour
                times[key].append(hour.timestamp() + 3600 * (i + 0.5) / len(samples))
                values[key].append(value)
    return {key: Series(times[key], values[key]) for key in times}


def load_injected(path: Path, windows: Windows) -> dict[int, list[Injected]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"--injected {path}: {exc}") from None
    injected: dict[int, list[Injected]] = defaultdict(list)
    for change in data.get("changes", []):
        start = datetime.fromisoformat(change["start"])
        # A lasting change is caught or missed before the baseline has absorbed it.
        end = datetime.fromisoformat(change["end"]) if change["end"] else start + windows.baseline
        injected[change["endpoint"]].append(Injected(start, end, change["slower_by"]))
    return injected
