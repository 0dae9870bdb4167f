"""Link tokens: the digest and the reference an issued link leaves behind give the token back
only with the secret, and only for the recipients it was issued to."""

import re

import pytest

from tenancy import link_tokens

SECRET = "s3cret-key-for-tests"
REFERENCE = re.compile(r"\{\{link:invitation:([A-Za-z0-9_-]{22})\}\}")


def issued(recipients=("dana@example.com",), secret=SECRET):
    return link_tokens.issue("invitation", recipients=list(recipients), secret=secret)


def test_the_rendered_token_is_the_one_the_digest_was_made_of():
    link = issued()
    text = f"Accept: https://app.example.com/join?token={link.reference}\n"

    rendered = link_tokens.render(text, recipients=["dana@example.com"], secret=SECRET)

    token = re.search(r"token=([A-Za-z0-9_-]+)\n", rendered)[1]
    assert len(token) == 43 and link.reference not in rendered
    assert link_tokens.digest(token) == link.digest
    assert rendered == link_tokens.render(text, recipients=["dana@example.com"], secret=SECRET)


def test_another_secret_or_another_recipient_renders_a_token_that_opens_nothing():
    link = issued()

    elsewhere = [
        link_tokens.render(link.reference, recipients=["dana@example.com"], secret="other"),
        link_tokens.render(link.reference, recipients=["eve@example.com"], secret=SECRET),
        link_tokens.render(
            link.reference, recipients=["dana@example.com", "eve@example.com"], secret=SECRET
        ),
    ]

    assert all(link_tokens.digest(token) != link.digest for token in elsewhere)


def test_each_issue_is_a_new_nonce_and_digest():
    first, second = issued(), issued()

    assert first.reference != second.reference and first.digest != second.digest
    assert REFERENCE.fullmatch(first.reference)


def test_text_without_a_reference_and_unknown_purposes_are_left_alone():
    text = "{{link:admin:AAAAAAAAAAAAAAAAAAAAAA}} and {{ link }}"

    assert link_tokens.render(text, recipients=["a@example.com"], secret=SECRET) == text
    with pytest.raises(ValueError, match="purpose"):
        link_tokens.issue("admin", recipients=["a@example.com"], secret=SECRET)
