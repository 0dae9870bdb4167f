def test_healthz_reports_database_and_migrations(client, db):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "migrations": "applied"}


def test_healthz_rejects_other_methods(client, db):
    assert client.post("/healthz").status_code == 405
