"""Replay an alert rule over stored history and print every state change it would have made.

    python manage.py backtest_alerts --rule 3 --days 30 --json
    python manage.py backtest_alerts --metric output_tps --regression-pct 20 --days 30 --json
    python manage.py backtest_alerts --metric output_tps --days 90 --json \\
        --injected changes.json       # from generate_history --changes-out

Settings not given are those of a rule made in the admin with nothing changed
(dashboard/alerts/defaults.py).

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

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django.utils import timezone

from dashboard.alerts import decide
from dashboard.alerts.defaults import CUSUM, MANN_WHITNEY, PRECEDING, SAME_HOURS
from dashboard.alerts.history import history_start, load_series, windows_of
from dashboard.alerts.models import METRIC_LABELS, AlertRule
from dashboard.alerts.replay import Injected, Windows, replay, score
from dashboard.alerts.schedule import EVALUATE_EVERY_S
from probes.models import Workload


class Command(BaseCommand):
    help = "Replay an alert rule over stored runs and rollups; JSON lines per state change."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--rule", type=int, help="An existing rule's id.")
        parser.add_argument("--metric", choices=sorted(decide.METRICS - {"minutes_since_ok"}))
        parser.add_argument(
            "--regression-pct", type=float, help="Fire past this %% worse."
        )  # argparse formats help: %% is a %
        parser.add_argument("--threshold", type=float, help="Or: an absolute threshold.")
        # Left out, each setting is the admin's default for a new rule (defaults.py): the
        # backtest of `--metric output_tps --regression-pct 20` is that rule's backtest.
        parser.add_argument("--test", choices=[CUSUM, MANN_WHITNEY])
        parser.add_argument("--recent-min", type=int)
        parser.add_argument("--baseline-h", type=int)
        parser.add_argument(
            "--baseline",
            choices=[PRECEDING, SAME_HOURS],
            help="same_hours: the same time of day on the previous 7 days.",
        )
        parser.add_argument("--min-samples", type=int)
        parser.add_argument("--min-baseline-samples", type=int)
        parser.add_argument("--max-p", type=float)
        parser.add_argument("--for-min", type=int)
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
        if options["endpoint"]:
            scope &= Q(endpoint_id__in=options["endpoint"])
        series = load_series(scope, metric, history_start(start, windows), end)
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
            return (
                rule.as_condition(),
                rule.as_timing(),
                windows_of(rule),
                rule.runs_filter(),
                rule.metric,
            )
        rule = rule_from_options(options)
        return rule.as_condition(), rule.as_timing(), windows_of(rule), Q(), rule.metric


# Command-line option -> the rule's field it sets (None: the field's default).
_OPTION_FIELDS = {
    "test": "test",
    "recent_min": "recent_window_min",
    "baseline_h": "baseline_window_h",
    "baseline": "baseline_mode",
    "min_samples": "min_samples",
    "min_baseline_samples": "min_baseline_samples",
    "max_p": "max_p_value",
    "for_min": "pending_for_min",
}


def rule_from_options(options: dict) -> AlertRule:
    """An unsaved rule as the admin would make it, with the options given changed."""
    metric = options.get("metric")
    if not metric:
        raise CommandError("Give --rule ID, or --metric with --regression-pct or --threshold.")
    threshold = options.get("threshold")
    fields = {
        "name": "backtest",
        "metric": metric,
        "condition": decide.THRESHOLD if threshold is not None else decide.REGRESSION,
        "threshold": threshold,
    }
    if options.get("regression_pct") is not None:
        fields["regression_pct"] = options["regression_pct"]
    fields |= {f: options[o] for o, f in _OPTION_FIELDS.items() if options.get(o) is not None}
    rule = AlertRule(**fields)
    try:
        rule.clean()
        rule.as_condition()
    except (ValueError, ValidationError) as exc:
        raise CommandError(str(exc)) from None
    return rule


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
