"""Can a stranger tell which addresses have an account? 100 known and 100 unknown addresses,
in a shuffled order, against `POST /v1/signin` and `POST /v1/signup` on gunicorn (its
Turnstile check against a local stand-in siteverify), from one client, as an attacker would.

    .venv/bin/python bench/address_oracle.py [--db postgres|sqlite] [--addresses N]
        [--rounds R] [--pg-database NAME]

For each route it prints whether any header (but Date) or body size differs between the two
sets, the median time of each, and the accuracy of the best single time threshold at telling
them apart (0.5 is chance; the best of 2N thresholds on one sample overfits it, so a few
points above 0.5 are expected even when nothing separates them: the same figure for two sets
of unknown addresses is printed beside it as the baseline). Each address is asked once per
round, with fresh addresses each round (R rounds, after 20 warm-up requests). It prints
figures; it never judges them.
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import (  # noqa: E402
    bench_env,
    drop_postgres_database,
    free_port,
    load,
    manage,
    recreate_postgres_database,
    start_gunicorn,
)

CAPTCHA = "XXXX.DUMMY.TOKEN.XXXX"


def best_threshold_accuracy(first: list[float], second: list[float]) -> float:
    """The accuracy of the best rule "above t is `first`" or "above t is `second`"."""
    labelled = sorted([(t, 0) for t in first] + [(t, 1) for t in second])
    total, best = len(labelled), 0.0
    ones_below = zeros_below = 0
    for _, label in labelled:
        ones_below += label
        zeros_below += 1 - label
        # "below or at t is `first`": right on zeros below and ones above.
        right = zeros_below + (len(second) - ones_below)
        best = max(best, right / total, 1 - right / total)
    return best


def _shape(response: requests.Response) -> tuple:
    headers = tuple(sorted((k.lower(), v) for k, v in response.headers.items() if k != "Date"))
    return response.status_code, headers, len(response.content), response.content


def probe(base: str, route: str, addresses: list[str]) -> tuple[list[float], set]:
    session = requests.Session()
    times, shapes = [], set()
    for email in addresses:
        body = {"email": email, "captcha_token": CAPTCHA}
        if route == "signup":
            body["tenant_name"] = "Probe"
        started = time.perf_counter()
        response = session.post(f"{base}/v1/{route}", json=body)
        times.append(time.perf_counter() - started)
        shapes.add(_shape(response))
    return times, shapes


def run(db: str, *, addresses: int, rounds: int, pg_database: str) -> None:
    from operations.demo.siteverify import PASSING_SECRET, SITEVERIFY_PATH, siteverify_server

    siteverify = siteverify_server(host="127.0.0.1", port=0)
    threading.Thread(target=siteverify.serve_forever, daemon=True).start()
    if db == "postgres":
        recreate_postgres_database(pg_database)
        database_url = f"postgres://postgres@127.0.0.1:5432/{pg_database}"
    else:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='tw_bench_oracle_')}/bench.sqlite3"
    env = {
        **bench_env(database_url),
        "SIGNUP_ENABLED": "true",
        "SIGNUP_RATE_IP": "100000000/s",
        "SIGNIN_RATE_IP": "100000000/s",
        "SIGNIN_URL": "https://app.example.com/signin?token={token}",
        "TURNSTILE_SECRET_KEY": PASSING_SECRET,
        "TURNSTILE_VERIFY_URL": f"http://127.0.0.1:{siteverify.server_port}{SITEVERIFY_PATH}",
        "TURNSTILE_HOSTNAMES": "example.com",
    }
    os.environ.update(env)
    manage(env, "migrate", "--verbosity=0")
    import django

    django.setup()
    from tenancy.services import tenant_create

    # Every address is asked once: a repeat of one would meet its own earlier request (a
    # pending signup, a held sign-in link), which the other set never does.
    known_by_round = [
        [f"known{n}.{uuid.uuid4().hex[:8]}@example.com" for n in range(addresses)]
        for _ in range(rounds)
    ]
    for n, email in enumerate(email for known in known_by_round for email in known):
        tenant_create(name=f"Known {n}", owner_email=email)
    port = free_port()
    server = start_gunicorn(env, port)
    base = f"http://127.0.0.1:{port}"
    figures = {}
    try:
        for route in ("signin", "signup"):
            timing: dict[str, list[float]] = {"known": [], "unknown": [], "unknown-b": []}
            shapes: dict[str, set] = {"known": set(), "unknown": set(), "unknown-b": set()}
            probe(base, route, [f"warm{n}.{uuid.uuid4().hex}@example.com" for n in range(20)])
            for known in known_by_round:
                unknown = [f"u{uuid.uuid4().hex}@example.com" for _ in range(addresses)]
                unknown_b = [f"u{uuid.uuid4().hex}@example.com" for _ in range(addresses)]
                order = [("known", e) for e in known] + [("unknown", e) for e in unknown]
                order += [("unknown-b", e) for e in unknown_b]
                random.shuffle(order)
                for label, email in order:
                    times, seen = probe(base, route, [email])
                    timing[label] += times
                    shapes[label] |= {shape[:3] for shape in seen}
            figures[route] = (timing, shapes)
    finally:
        server.terminate()
        server.wait(timeout=30)
        siteverify.shutdown()
    report(db, figures, addresses=addresses, rounds=rounds)
    if db == "postgres":
        from django.db import connections

        connections.close_all()
        drop_postgres_database(pg_database)


def report(db: str, figures: dict, *, addresses: int, rounds: int) -> None:
    print(f"\n{db}: {addresses} known, {addresses} unknown addresses per round, {rounds} "
          f"round(s) after 20 warm-up requests; {load()}")  # fmt: skip
    print(f"{'route':<8} {'answers differ':>15} {'p50 known ms':>13} {'p50 unknown ms':>15} "
          f"{'best threshold':>15} {'baseline (unknown vs unknown)':>30}")  # fmt: skip
    for route, (timing, shapes) in figures.items():
        differ = "yes" if shapes["known"] != shapes["unknown"] else "no"
        accuracy = best_threshold_accuracy(timing["known"], timing["unknown"])
        baseline = best_threshold_accuracy(timing["unknown-b"], timing["unknown"])
        print(
            f"{route:<8} {differ:>15} {statistics.median(timing['known']) * 1000:>13.2f} "
            f"{statistics.median(timing['unknown']) * 1000:>15.2f} {accuracy:>15.2f} "
            f"{baseline:>30.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--addresses", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--pg-database", default="tw_bench_address_oracle")
    args = parser.parse_args()
    run(args.db, addresses=args.addresses, rounds=args.rounds, pg_database=args.pg_database)


if __name__ == "__main__":
    main()
