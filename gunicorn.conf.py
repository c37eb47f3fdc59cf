"""gunicorn settings; `gunicorn contextview.wsgi` reads this file from the working folder.

Threaded workers: a streamed download (a dataset export, a report of a long
session) keeps one thread busy for as long as it takes, while the worker process
keeps answering the arbiter's heartbeat; a sync worker would be killed at
`timeout` in the middle of it.

Threads are few, so in production they sit behind a buffering proxy (nginx in
docker-compose.yml): a client that sends or reads slowly waits on the proxy, not on
one of these threads.
"""

import os

worker_class = "gthread"
workers = int(os.environ.get("WEB_WORKERS", "2"))
threads = int(os.environ.get("WEB_THREADS", "4"))
timeout = int(os.environ.get("WEB_TIMEOUT", "60"))
