"""The ``alert_rules`` section of a catalog file (probes/catalog/yaml_file.py).

Rules are found by name. Scope by slugs: ``model`` (a canonical model), ``workload``, or
one endpoint as ``provider`` (its slug) with ``model_id``;
``channels`` names channels set up in the admin (their secrets stay there).
"""

from __future__ import annotations

from probes.catalog.loader import LoadReport
from probes.catalog.yaml_file import CatalogFileError, Fields, Lined, check_keys, require, upsert
from probes.models import CanonicalModel, Endpoint, Workload

from .models import AlertRule, Channel

RULE_FIELDS = Fields(
    AlertRule,
    (
        "name",
        "enabled",
        "region",
        "metric",
        "condition",
        "regression_pct",
        "threshold",
        "recent_window_min",
        "baseline_window_h",
        "baseline_mode",
        "test",
        "min_samples",
        "min_baseline_samples",
        "max_p_value",
        "pending_for_min",
        "resolve_margin_pct",
        "repeat_every_min",
        "notify_on_resolve",
        "notes",
    ),
)


def _by_slug(model, item: Lined, key: str):
    slug = item.get(key)
    if slug in (None, ""):
        return None
    row = model.objects.filter(slug=slug).first()
    if row is None:
        raise CatalogFileError(f"unknown {key} {slug!r}", item.line_of(key))
    return row


def _endpoint(item: Lined) -> Endpoint | None:
    """One endpoint, by its provider's slug and its model id (both or neither)."""
    if "provider" not in item and "model_id" not in item:
        return None
    provider = require(item, "provider", "an endpoint-scoped rule")
    model_id = require(item, "model_id", "an endpoint-scoped rule")
    endpoint = Endpoint.objects.filter(provider__slug=provider, model_id=model_id).first()
    if endpoint is None:
        raise CatalogFileError(
            f"no endpoint {model_id!r} of provider {provider!r}", item.line_of("model_id")
        )
    return endpoint


# A scope field and the file's key that sets it.
_SCOPE_KEYS = {"canonical_model": "model", "workload": "workload", "endpoint": "model_id"}


def load_alert_rules(items: list[Lined], report: LoadReport) -> None:
    for item in items:
        check_keys(
            item, RULE_FIELDS, extra=("model", "workload", "provider", "model_id", "channels")
        )
        name = require(item, "name", "an alert rule")
        rule = AlertRule.objects.filter(name=name).first()
        scope = {
            "canonical_model": _by_slug(CanonicalModel, item, "model"),
            "workload": _by_slug(Workload, item, "workload"),
            "endpoint": _endpoint(item),
        }
        names = tuple(n for n in RULE_FIELDS.allowed if n != "name")
        # Scope fields the file names are set like the others (a missing key keeps them).
        item_scope = {k: v for k, v in scope.items() if _SCOPE_KEYS[k] in item}
        rule = upsert(
            AlertRule,
            {"pk": rule.pk} if rule else {"name": name},
            _with(item, item_scope),
            (*names, *item_scope),
            report,
            "alert rules",
        )
        if "channels" in item:
            wanted = item["channels"] or []
            channels = list(Channel.objects.filter(name__in=wanted))
            missing = sorted(set(wanted) - {c.name for c in channels})
            if missing:
                raise CatalogFileError(f"unknown channel {missing[0]!r}", item.line_of("channels"))
            rule.channels.set(channels)


def _with(item: Lined, extra: dict) -> Lined:
    out = Lined()
    out.line, out.lines = item.line, dict(item.lines)
    out.update(item)
    out.update(extra)
    for key in extra:
        out.lines[key] = item.line_of(_SCOPE_KEYS[key])
    return out
