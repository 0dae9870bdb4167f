"""Loaded with `-p tests.testenv` before Django reads its settings: the few variables the
test process needs that an operator would otherwise have to set."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")
