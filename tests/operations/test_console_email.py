"""The development e-mail backend prints a message as written: a long link stays whole."""

import io

from django.core.mail import EmailMessage

from operations.console_email import ReadableConsoleBackend

LINK = "http://localhost:3000/signup/verify?token=tkv_" + "a1B2_c3-" * 12


def test_a_long_link_is_printed_whole_with_the_headers():
    stream = io.StringIO()
    message = EmailMessage("Verify — your address", f"Open {LINK} to verify.", to=["a@b.c"])

    ReadableConsoleBackend(stream=stream).send_messages([message])

    printed = stream.getvalue()
    assert f"Open {LINK} to verify.\n" in printed
    assert "To: a@b.c\n" in printed
    assert "=3D" not in printed
    assert printed.endswith("-" * 79 + "\n")
