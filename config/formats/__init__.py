"""The admin's date formats: one ISO-like form on every page (FORMAT_MODULE_PATH)."""
