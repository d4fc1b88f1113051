"""Re-encrypt every stored API key under the current FIELD_ENCRYPTION_KEY.

After a rotation: put the old secret in FIELD_ENCRYPTION_KEY_FALLBACKS (or
SECRET_KEY_FALLBACKS), run this, then drop the old secret. Keys that no known secret
decrypts are left as they are and named: enter them again in the admin.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from probes.models import Provider


class Command(BaseCommand):
    help = "Re-encrypt stored provider API keys under the current FIELD_ENCRYPTION_KEY."

    def handle(self, *args, **options) -> None:
        rotated, unreadable = 0, []
        for provider in Provider.objects.exclude(api_key_encrypted="").order_by("name"):
            if not provider.rotate_key():
                unreadable.append(provider.name)
                continue
            # update(): only the key column, and no second re-encryption by save().
            Provider.objects.filter(pk=provider.pk).update(
                api_key_encrypted=provider.api_key_encrypted
            )
            rotated += 1
        self.stdout.write(f"Re-encrypted {rotated} stored API key(s) under the current key.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} stored key(s) cannot be decrypted with FIELD_ENCRYPTION_KEY "
                f"or its fallbacks: {', '.join(unreadable)}. Add the old secret to "
                "FIELD_ENCRYPTION_KEY_FALLBACKS, or enter these keys again in the admin."
            )
