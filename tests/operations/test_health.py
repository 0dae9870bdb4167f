import logging


def test_healthz_reports_database_and_migrations(client, db):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "migrations": "applied"}


def test_healthz_rejects_other_methods(client, db):
    assert client.post("/healthz").status_code == 405


def test_an_unknown_host_is_a_400_and_logs_no_traceback(client, db):
    reaching_root: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = reaching_root.append
    logging.getLogger().addHandler(handler)
    try:
        response = client.get("/healthz", HTTP_HOST="scanner.invalid")
    finally:
        logging.getLogger().removeHandler(handler)

    assert response.status_code == 400
    assert not [record for record in reaching_root if record.exc_info]
