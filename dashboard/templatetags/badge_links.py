"""{% endpoint_badges endpoint probes %}: an endpoint page's badges with their Markdown."""

from __future__ import annotations

from django import template

from dashboard.web.badges import endpoint_badge_links

register = template.Library()


@register.inclusion_tag("dashboard/partials/badges.html", takes_context=True)
def endpoint_badges(context, endpoint, probes) -> dict:
    # Speed badges are per workload: the one the endpoint's first probe measures.
    probe = next(iter(probes), None)
    workload = probe.workload.slug if probe is not None else ""
    return {"badges": endpoint_badge_links(context["request"], endpoint, workload)}
