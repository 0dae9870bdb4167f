"""The shape every error answer of the API has: an RFC 9457 problem document."""

PROBLEM = "application/problem+json"


def assert_problem(response, status):
    assert response.status_code == status
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["type"].startswith("https://")
    assert body["title"] and body["detail"]
    return body
