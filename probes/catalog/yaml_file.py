"""Config as code: providers, endpoints, prices, probes, workloads, maintenance windows and
alert rules from a YAML file (``manage.py load_catalog --file probes.yaml``; see
probes.example.yaml).

* Idempotent: rows are found by their natural keys (a provider's slug, an endpoint's
  model id, a probe's workload and region, a price's date, a workload's slug, an alert
  rule's name). The fields the file states are set; fields it leaves out keep what the
  admin set. Prices are history: an existing price is never rewritten.
* Keys by environment-variable name only (``api_key_env``): a file holding a key is
  refused, so it can live in a repository.
* All or nothing: the file is checked whole and loaded in one transaction; the first
  problem is reported with its line number and nothing is written.

Other apps add sections (``register_section``): alert rules belong to dashboard.alerts,
which probes must not import.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, time, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils.text import slugify

from probes.catalog import key_hosts
from probes.catalog.loader import LoadReport
from probes.kinds import schemas
from probes.models import (
    CanonicalModel,
    Endpoint,
    MaintenanceWindow,
    Price,
    Probe,
    Provider,
    Workload,
)


class CatalogFileError(Exception):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


class Lined(dict):
    """A YAML mapping that remembers the line of itself and of each key."""

    line: int = 0

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[Any, int] = {}

    def line_of(self, key: str) -> int:
        return self.lines.get(key, self.line)


class _Loader(yaml.SafeLoader):
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> Lined:
    loader.flatten_mapping(node)
    out = Lined()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise CatalogFileError(f"duplicate key {key!r}", key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse(text: str) -> Lined:
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise CatalogFileError(f"not valid YAML: {exc.problem or exc}", line) from None
    if data is None:
        return Lined()
    if not isinstance(data, Lined):
        raise CatalogFileError("the file must be a mapping of sections (providers: ...)", 1)
    return data


# -- sections ------------------------------------------------------------------------------

Section = Callable[[list[Lined], LoadReport], None]
_SECTIONS: dict[str, Section] = {}


def register_section(name: str, load: Section) -> None:
    _SECTIONS[name] = load


def sections() -> list[str]:
    return sorted(_SECTIONS)


def load_file(path: str | Path) -> LoadReport:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogFileError(f"cannot read {path}: {exc.strerror}") from None
    return load_text(text)


@transaction.atomic
def load_text(text: str) -> LoadReport:
    data = parse(text)
    report = LoadReport()
    unknown = [key for key in data if key not in _SECTIONS]
    if unknown:
        raise CatalogFileError(
            f"unknown section {unknown[0]!r}; sections: {', '.join(sections())}",
            data.line_of(unknown[0]),
        )
    # Workloads first: probes and alert rules name them.
    order = sorted(data, key=lambda s: (s != "workloads", s != "providers", s))
    for name in order:
        _SECTIONS[name](_items(data, name), report)
    report.plan()
    return report


def _items(parent: Lined, key: str) -> list[Lined]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, Lined) for v in value):
        raise CatalogFileError(f"{key} must be a list of mappings", parent.line_of(key))
    return value


# -- turning mappings into rows --------------------------------------------------------------


@dataclass
class Fields:
    """The fields of ``model`` a file may set, and those it must not."""

    model: type[models.Model]
    allowed: tuple[str, ...]
    forbidden: dict[str, str] = field(default_factory=dict)  # field -> why


def check_keys(item: Lined, spec: Fields, extra: tuple[str, ...] = ()) -> None:
    for key in item:
        if key in spec.forbidden:
            raise CatalogFileError(spec.forbidden[key], item.line_of(key))
        if key not in spec.allowed and key not in extra:
            known = ", ".join([*spec.allowed, *extra])
            raise CatalogFileError(f"unknown field {key!r}; fields: {known}", item.line_of(key))


def require(item: Lined, key: str, what: str) -> Any:
    if item.get(key) in (None, ""):
        raise CatalogFileError(f"{what} needs {key!r}", item.line)
    return item[key]


def _save(row: models.Model, item: Lined, exclude: tuple[str, ...] = ()) -> None:
    """Validate like the admin would, then save; errors point at the offending key."""
    try:
        row.full_clean(exclude=list(exclude), validate_unique=False)
    except ValidationError as exc:
        name, messages = next(iter(exc.message_dict.items()))
        line = item.line_of(name) if name in item else item.line
        where = "" if name == "__all__" else f"{name}: "
        raise CatalogFileError(f"{where}{' '.join(messages)}", line) from None
    row.save()


def upsert(
    model: type[models.Model],
    keys: dict[str, Any],
    item: Lined,
    names: tuple[str, ...],
    report: LoadReport,
    kind: str,
    defaults: dict[str, Any] | None = None,
) -> models.Model:
    row = model.objects.filter(**keys).first()
    created = row is None
    if created:
        row = model(**keys, **(defaults or {}))
    for name in names:
        if name in item:
            setattr(row, name, item[name])
    _save(row, item)
    report.add(kind, created)
    return row


# -- workloads -----------------------------------------------------------------------------

WORKLOAD_FIELDS = Fields(
    Workload,
    (
        "slug",
        "name",
        "description",
        "kind",
        "answer_check",
        "material",
        "system",
        "instruction",
        "messages",
        "params",
        "max_tokens",
        "target_output_tokens",
        "temperature",
        "approx_input_tokens",
        "requests",
        "enabled",
    ),
)


def _refuse_remote_refs(item: Lined) -> None:
    """A schema reference outside the workload, refused at the line that names it."""
    remote = next(schemas.remote_refs(item.get("params")), None)
    if remote is None:
        return
    path, ref = remote
    line, node = item.line_of("params"), item.get("params")
    for step in path:  # the deepest mapping on the path that knows its lines
        if isinstance(node, Lined):
            line = node.line_of(step)
        node = node[step]
    raise CatalogFileError(f"params: {schemas.refusal(path, ref)}", line)


def _load_workloads(items: list[Lined], report: LoadReport) -> None:
    for item in items:
        check_keys(item, WORKLOAD_FIELDS)
        slug = require(item, "slug", "a workload")
        _refuse_remote_refs(item)
        names = tuple(n for n in WORKLOAD_FIELDS.allowed if n != "slug")
        defaults = {"name": slug}
        upsert(Workload, {"slug": slug}, item, names, report, "workloads", defaults)


# -- providers, endpoints, prices, probes ----------------------------------------------------

_KEY_REFUSED = (
    "API keys are given by environment variable name only: use api_key_env: NAME "
    "(the file can then live in a repository)"
)
PROVIDER_FIELDS = Fields(
    Provider,
    (
        "name",
        "slug",
        "api_style",
        "base_url",
        "api_key_env",
        "requires_key",
        "extra_headers",
        "connect_timeout_s",
        "first_token_timeout_s",
        "stall_timeout_s",
        "total_timeout_s",
        "max_concurrency",
        "enabled",
        "website",
        "notes",
    ),
    forbidden={"api_key": _KEY_REFUSED, "key": _KEY_REFUSED, "api_key_encrypted": _KEY_REFUSED},
)
ENDPOINT_FIELDS = Fields(
    Endpoint,
    ("model_id", "extra_body", "token_counter", "length_control", "enabled", "notes"),
    forbidden={
        "send_min_tokens": "send_min_tokens is now length_control: min_tokens "
        "(or ignore_eos: answers always run to max_tokens)"
    },
)
PRICE_FIELDS = ("effective_from", "input_per_m", "cached_input_per_m", "output_per_m", "source_url")
PROBE_FIELDS = ("workload", "region", "interval_s", "jitter_s", "enabled")


def _load_providers(items: list[Lined], report: LoadReport) -> None:
    for item in items:
        check_keys(item, PROVIDER_FIELDS, extra=("endpoints",))
        name = require(item, "name", "a provider")
        slug = item.get("slug") or slugify(name)
        names = tuple(n for n in PROVIDER_FIELDS.allowed if n != "slug")
        _check_key_binding(Provider.objects.filter(slug=slug).first(), item)
        provider = upsert(Provider, {"slug": slug}, item, names, report, "providers")
        for endpoint_item in _items(item, "endpoints"):
            _load_endpoint(provider, endpoint_item, report)


def _check_key_binding(old: Provider | None, item: Lined) -> None:
    """A key variable goes only where it is bound (PROVIDER_KEY_ENV_HOSTS, the catalog's
    vendors), and a bound key does not move to another scheme, host or port: a file is
    not a superuser, so such a row is refused, at its line."""
    name = item.get("api_key_env", old.api_key_env if old else "")
    url = item.get("base_url", old.base_url if old else "")
    if not name or not isinstance(url, str) or not isinstance(name, str):
        return
    refusal = key_hosts.env_host_refusal(name, url)
    if refusal:
        raise CatalogFileError(f"api_key_env: {refusal}", item.line_of("api_key_env"))
    if old is not None and old.api_key_env == name and old.key_origin:
        move = Provider(base_url=url, api_key_env=name, key_origin=old.key_origin).key_move()
        if move:
            raise CatalogFileError(
                f"base_url: {move}; only a superuser may move it (in the admin)",
                item.line_of("base_url"),
            )


def _load_endpoint(provider: Provider, item: Lined, report: LoadReport) -> None:
    check_keys(item, ENDPOINT_FIELDS, extra=("model", "prices", "probes"))
    model_id = require(item, "model_id", "an endpoint")
    model_name = require(item, "model", "an endpoint (the canonical model's name)")
    canonical = CanonicalModel.objects.filter(name=model_name).first()
    if canonical is None:
        canonical = CanonicalModel(name=model_name, slug=slugify(str(model_name).replace(".", "-")))
        _save(canonical, item)
        report.add("models", True)
    names = tuple(n for n in ENDPOINT_FIELDS.allowed if n != "model_id")
    endpoint = upsert(
        Endpoint,
        {"provider": provider, "model_id": model_id},
        item,
        names,
        report,
        "endpoints",
        defaults={"canonical_model": canonical},
    )
    if endpoint.canonical_model_id != canonical.pk:
        endpoint.canonical_model = canonical
        endpoint.save(update_fields=["canonical_model"])
    for price_item in _items(item, "prices"):
        _load_price(endpoint, price_item, report)
    for probe_item in _items(item, "probes"):
        _load_probe(endpoint, probe_item, report)


def _decimal(item: Lined, key: str) -> Decimal | None:
    value = item.get(key)
    if value is None:
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        raise CatalogFileError(f"{key}: not a number: {value!r}", item.line_of(key)) from None


def _load_price(endpoint: Endpoint, item: Lined, report: LoadReport) -> None:
    for key in item:
        if key not in PRICE_FIELDS:
            fields = ", ".join(PRICE_FIELDS)
            raise CatalogFileError(f"unknown field {key!r}; fields: {fields}", item.line_of(key))
    day = item.get("effective_from") or date.today()
    if not isinstance(day, date):
        line = item.line_of("effective_from")
        raise CatalogFileError("effective_from: a date, e.g. 2025-06-01", line)
    if Price.objects.filter(endpoint=endpoint, effective_from=day).exists():
        report.add("prices", False)  # prices are history: never rewritten
        return
    price = Price(
        endpoint=endpoint,
        effective_from=day,
        input_per_m=_decimal(item, "input_per_m"),
        cached_input_per_m=_decimal(item, "cached_input_per_m"),
        output_per_m=_decimal(item, "output_per_m"),
        source_url=item.get("source_url") or "",
    )
    _save(price, item)
    report.add("prices", True)


def _load_probe(endpoint: Endpoint, item: Lined, report: LoadReport) -> None:
    for key in item:
        if key not in PROBE_FIELDS:
            fields = ", ".join(PROBE_FIELDS)
            raise CatalogFileError(f"unknown field {key!r}; fields: {fields}", item.line_of(key))
    slug = require(item, "workload", "a probe")
    workload = Workload.objects.filter(slug=slug).first()
    if workload is None:
        raise CatalogFileError(f"unknown workload {slug!r}", item.line_of("workload"))
    region = item.get("region") or "local"
    keys = {"endpoint": endpoint, "workload": workload, "region": region}
    before = Probe.objects.filter(**keys).values_list("interval_s", "enabled").first()
    probe = upsert(Probe, keys, item, ("interval_s", "jitter_s", "enabled"), report, "probes")
    if before != (probe.interval_s, probe.enabled):  # new, or its schedule changed
        report.to_plan.append(probe)


# -- maintenance windows (Gatus' shape) -----------------------------------------------------

MAINTENANCE_KEYS = (
    "name", "provider", "endpoint", "start", "duration", "timezone", "every", "pause_probes",
    "enabled", "reason",
)  # fmt: skip
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def _duration(item: Lined) -> timedelta:
    """Gatus' durations: 1h, 30m, 1h30m, 90s."""
    text = str(require(item, "duration", "a maintenance window")).strip()
    match = _DURATION.match(text)
    if not text or not match:
        raise CatalogFileError(
            f"duration {text!r}: write it like 1h, 30m or 1h30m", item.line_of("duration")
        )
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


def _start(item: Lined) -> time:
    value = require(item, "start", "a maintenance window")
    if isinstance(value, int):  # YAML 1.1 reads an unquoted 23:00 as sexagesimal minutes
        return time(value // 60 % 24, value % 60)
    try:
        return time.fromisoformat(str(value))
    except ValueError:
        raise CatalogFileError(
            f"start {value!r}: write it as HH:MM", item.line_of("start")
        ) from None


def _load_maintenance_windows(items: list[Lined], report: LoadReport) -> None:
    for item in items:
        for key in item:
            if key not in MAINTENANCE_KEYS:
                known = ", ".join(MAINTENANCE_KEYS)
                raise CatalogFileError(f"unknown field {key!r}; fields: {known}", item.line_of(key))
        name = require(item, "name", "a maintenance window")
        slug = require(item, "provider", "a maintenance window")
        provider = Provider.objects.filter(slug=slug).first()
        if provider is None:
            raise CatalogFileError(f"unknown provider {slug!r}", item.line_of("provider"))
        scope: dict[str, Any] = {"provider": provider, "endpoint": None}
        if item.get("endpoint"):  # one endpoint of the provider, by its model id
            endpoint = provider.endpoints.filter(model_id=item["endpoint"]).first()
            if endpoint is None:
                raise CatalogFileError(
                    f"{slug} has no endpoint {item['endpoint']!r}", item.line_of("endpoint")
                )
            scope = {"provider": None, "endpoint": endpoint}
        every = item.get("every") or []
        if not isinstance(every, list):
            raise CatalogFileError("every is a list of weekdays", item.line_of("every"))
        fields = scope | {
            "start": _start(item),
            "duration": _duration(item),
            "time_zone": item.get("timezone") or "UTC",
            "days": [str(day).lower() for day in every],
            "pause_probes": bool(item.get("pause_probes", False)),
            "enabled": bool(item.get("enabled", True)),
            "reason": str(item.get("reason") or ""),
        }
        row = MaintenanceWindow.objects.filter(name=name).first()
        created = row is None
        row = row or MaintenanceWindow(name=name)
        for key, value in fields.items():
            setattr(row, key, value)
        _save(row, item)
        report.add("maintenance windows", created)


register_section("workloads", _load_workloads)
register_section("maintenance_windows", _load_maintenance_windows)
register_section("providers", _load_providers)
