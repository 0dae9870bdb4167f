"""A recorded Resend batch on its way out: each email's link references rendered for its own
recipients, the same bytes on every send, and a batch without one sent as recorded."""

import json

from delivery.transports.resend import batch_texts_mapped
from tenancy import link_tokens

SECRET = "s3cret-key-for-tests"


def issued(recipients):
    return link_tokens.issue("invitation", recipients=recipients, secret=SECRET)


def test_a_batch_body_renders_each_email_for_its_own_recipients_the_same_every_time():
    dana, eve = issued(["dana@example.com"]), issued(["eve@example.com"])
    emails = [
        {"to": ["dana@example.com"], "subject": "é", "text": dana.reference},
        {"to": ["eve@example.com"], "subject": "s", "text": eve.reference},
        {"to": ["x@example.com"], "subject": "s", "text": 'plain\n"q"'},
    ]
    body = json.dumps(emails, separators=(",", ":"), ensure_ascii=False)

    def render(text, to):
        return link_tokens.render(text, recipients=to, secret=SECRET)

    sent = batch_texts_mapped(body, render)

    texts = [email["text"] for email in json.loads(sent)]
    assert [link_tokens.digest(t) for t in texts[:2]] == [dana.digest, eve.digest]
    assert texts[2] == 'plain\n"q"'
    assert sent == batch_texts_mapped(body, render)
    assert batch_texts_mapped(body, lambda text, to: text) == body
