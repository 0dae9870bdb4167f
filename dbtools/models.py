"""The database tools' one table: the rate-limit counters every web worker shares."""

from django.db import models


class RateWindow(models.Model):
    """One request counter of a rate limit (a user, or a client address for anonymous
    requests and failed authentication), shared by every web worker on every machine.

    The window starts at the key's first request and lasts the rate's period; the first
    request after it ends starts the next one. Times are microseconds since the Unix epoch
    on the database's clock, so one statement counts and compares on either database. See
    dbtools/ratelimit.py."""

    key = models.CharField(max_length=100, primary_key=True)
    count = models.IntegerField()
    expires_us = models.BigIntegerField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.count} until {self.expires_us} µs"
