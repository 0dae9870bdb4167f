"""What the browser tests share: Debian's chromium (Playwright's own browser download is not
used) and how long a busy machine may take to answer."""

import os
import shutil

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Generous: a busy CI machine may take seconds to start chromium or answer a page.
TIMEOUT_MS = 30_000
