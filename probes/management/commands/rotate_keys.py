"""Re-encrypt every stored secret under the current FIELD_ENCRYPTION_KEY: provider API keys
and every encrypted JSON field (alert channels' settings).

After a rotation: put the old secret in FIELD_ENCRYPTION_KEY_FALLBACKS (or
SECRET_KEY_FALLBACKS), run this, then drop the old secret. Secrets that no known key
decrypts are left as they are and named: enter them again in the admin.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from probes.models import Provider
from probes.models.encrypted import Undecryptable, encrypted_fields


class Command(BaseCommand):
    help = "Re-encrypt stored provider API keys and channel settings under the current key."

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
        # Found through the app registry: probes does not import the apps that use the field.
        for model, name in encrypted_fields():
            count = 0
            for row in model.objects.exclude(**{f"{name}__isnull": True}):
                value = getattr(row, name)
                if isinstance(value, Undecryptable):
                    unreadable.append(f"{model._meta.verbose_name} {row}")
                    continue
                # Reading decrypted it with whichever key made it; writing encrypts it
                # under the current key.
                model.objects.filter(pk=row.pk).update(**{name: value})
                count += 1
            label = model._meta.verbose_name_plural
            self.stdout.write(f"Re-encrypted the {name} of {count} {label}.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} stored key(s) cannot be decrypted with FIELD_ENCRYPTION_KEY "
                f"or its fallbacks: {', '.join(unreadable)}. Add the old secret to "
                "FIELD_ENCRYPTION_KEY_FALLBACKS, or enter these keys again in the admin."
            )
