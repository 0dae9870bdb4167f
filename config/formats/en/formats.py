"""English formats with ISO dates, as the queue-health page writes them: "2026-03-02
09:00:00 UTC" everywhere in the admin, never "March 2, 2026, 9 a.m." beside it."""

DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
DATETIME_FORMAT = "Y-m-d H:i:s e"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
