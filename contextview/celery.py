"""The Celery application of contextview.

``celery -A contextview worker`` and ``celery -A contextview beat`` find ``app``
here. Configuration comes from Django settings whose names start with
``CELERY_`` (``CELERY_BROKER_URL`` and friends); tasks are found in each
installed app's ``tasks`` module.
"""

from __future__ import annotations

import gc
import os
from contextlib import suppress

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")

app = Celery("contextview")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def worker_process_ready(**_: object) -> None:
    """Load what every statistics run needs, and keep what the process starts with
    out of the garbage collector's walks.

    The default encoding's tokenizer (``tokens.DEFAULT_ENCODING``) takes 0.2 s to
    load, which the first session a process computed waited for. A worker process
    then holds Django, the tasks, what they import and the tokenizer's tables (some
    126,000 objects), all living as long as it does. Every full collection walked
    them again: 34-52 ms during which no statistics are computed, a few times a
    minute while sessions stream in. Frozen, they are skipped (as ``wsgi`` does for
    the web workers); what the tasks build later is collected as before.
    """
    from contextview.core.tokens import DEFAULT_ENCODING, load_encoding

    load_encoding(DEFAULT_ENCODING)
    gc.freeze()


@worker_process_init.connect
def _yield_to_ingest(**_: object) -> None:
    """Run statistics below the web's priority (settings.WORKER_NICE).

    On a machine the web and the workers share, an agent's export or batch waits for
    CPU while a worker computes statistics, which can wait: niced, the worker takes
    what the web leaves, and catches up when the agents pause.
    """
    from django.conf import settings

    increment = settings.WORKER_NICE
    if increment > 0:
        os.nice(increment)
        _own_group_lowered(increment)


# Where Linux shows the scheduling group of a process, on kernels that group by session.
AUTOGROUP = "/proc/self/autogroup"


def _own_group_lowered(increment: int) -> None:
    """Lower the worker process's scheduling group as its nice was lowered.

    Where the kernel groups processes by session (autogroups), CPU is shared between
    the groups before a nice value counts within one: a worker started in a session
    of its own (a service manager, ``setsid``, another terminal) took as much CPU as
    all the web's processes together, niced or not. So the process leads a session of
    its own, whose group it lowers, not that of the web it may have shared one with.
    Nothing changes where there are no autogroups, or where the process may not.
    """
    if not os.path.exists(AUTOGROUP):
        return
    try:
        os.setsid()
    except OSError:
        return  # it leads its process group: its group may hold others, left alone
    with suppress(OSError), open(AUTOGROUP, "w") as group:
        group.write(str(increment))
