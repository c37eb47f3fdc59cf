"""gunicorn settings; `gunicorn contextview.wsgi` reads this file from the working folder.

Threaded workers: a streamed download (a dataset export, a report of a long
session) keeps one thread busy for as long as it takes, while the worker process
keeps answering the arbiter's heartbeat; a sync worker would be killed at
`timeout` in the middle of it.

Threads are few, so in production they sit behind a buffering proxy (nginx in
docker-compose.yml): a client that sends or reads slowly waits on the proxy, not on
one of these threads.

Processes are two per core and one more (gunicorn's own rule of thumb), at most
nine: each runs Python one thread at a time, so with more of them one export's
parsing does not wait for another's while their threads wait on the database (on
two cores, the OTLP benchmark accepted about a seventh more spans a second with
five than with two). ``WEB_WORKERS`` and ``WEB_THREADS`` set them.
"""

import os

from contextview.serving import web_threads, web_workers

worker_class = "gthread"
workers = web_workers()
threads = web_threads()
timeout = int(os.environ.get("WEB_TIMEOUT", "60"))
