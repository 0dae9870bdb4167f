"""The development e-mail backend: each message printed as a reader reads it, so a link in
it can be copied as it stands (the demo's sign-up and invitation tokens).

Django 6.1's console backend prints the message as it would go on the wire: a body line
longer than 78 characters is quoted-printable, with `=3D` for `=` and soft line breaks
that cut a link in two. This one prints the headers and the text body as written."""

from django.core.mail import EmailMessage
from django.core.mail.backends.console import EmailBackend

_RULE = "-" * 79


class ReadableConsoleBackend(EmailBackend):
    def write_message(self, message: EmailMessage) -> None:
        encoded = message.message()
        headers = "".join(
            f"{name}: {value}\n"
            for name, value in encoded.items()
            if name.lower() not in {"content-transfer-encoding", "mime-version"}
        )
        self.stream.write(f"{headers}\n{message.body}\n{_RULE}\n")
