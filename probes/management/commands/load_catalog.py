"""`manage.py load_catalog [--demo]`: load the seed catalog (and the simulated demo)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from probes.catalog.loader import load_catalog, load_demo
from probes.catalog.seeds import CATALOG_AS_OF
from probes.catalog.yaml_file import CatalogFileError, load_file
from probes.models import validate_region


class Command(BaseCommand):
    help = (
        "Load the seed providers, models, prices, claims, workloads and probes (idempotent: "
        "existing rows and admin edits are kept). --demo adds the simulated providers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--demo",
            action="store_true",
            help="Also add the simulated demo providers served at SIMULATOR_URL (enabled).",
        )
        parser.add_argument(
            "--file",
            metavar="PATH",
            help="Load providers, endpoints, prices, probes, workloads and alert rules from "
            "a YAML file instead (config as code; see probes.example.yaml).",
        )
        parser.add_argument(
            "--region",
            default=settings.PROBE_REGION,
            help="Region of the probes to create (default: PROBE_REGION=%(default)s).",
        )

    def handle(self, *args, demo: bool, region: str, file: str | None, **options) -> None:
        try:
            validate_region(region)
        except ValidationError as exc:
            raise CommandError(f"--region {region!r}: {exc.messages[0]}") from None
        if file:
            try:
                report = load_file(file)
            except CatalogFileError as exc:
                raise CommandError(f"{file}: {exc}") from None
            self.stdout.write(f"{file}: {report or 'up to date'}")
            return
        report = load_catalog(region)
        self.stdout.write(f"Catalog (prices as of {CATALOG_AS_OF}): {report or 'up to date'}")
        if report.skipped:
            self.stdout.write(f"Catalog: {report.skipped_summary()}")
        if demo:
            report = load_demo(region, settings.SIMULATOR_URL)
            self.stdout.write(
                f"Demo (simulated, at {settings.SIMULATOR_URL}): {report or 'up to date'}"
            )
            if report.skipped:
                self.stdout.write(f"Demo: {report.skipped_summary()}")
