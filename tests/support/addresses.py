"""E-mail addresses of a chosen length, for the tests of length limits."""


def address(length: int) -> str:
    """A well-formed address of exactly `length` (70-320) characters: labels of 50 and a
    local part of at most 64, as Django's validator wants them."""
    domain = length - len("@com") - 64  # its labels, each with the dot that follows it
    labels = -(-domain // 51)
    local = length - len("@com") - 51 * labels
    result = "a" * local + "@" + ("d" * 50 + ".") * labels + "com"
    assert len(result) == length and 0 < local <= 64
    return result
