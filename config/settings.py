"""Settings, driven by the environment.

DATABASE_URL     switches from SQLite (var/db.sqlite3) to e.g. PostgreSQL.
SECRET_KEY       required when DEBUG is off.
ANTHROPIC_API_KEY enables real summaries; without it the offline summarizer is used.
"""

import json
import logging
import os
from pathlib import Path

import dj_database_url
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SESSION_INSPECTOR_VAR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

_debug = os.environ.get("DEBUG", "1").strip().lower()
if _debug not in ("0", "1", "true", "false", "yes", "no"):
    raise RuntimeError(f"DEBUG must be 1 or 0, not {_debug!r}.")
DEBUG = _debug in ("1", "true", "yes")
SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-insecure-key" if DEBUG else "")
if not SECRET_KEY:
    raise RuntimeError("Set SECRET_KEY when DEBUG is off.")
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
if not DEBUG:
    # Behind HTTPS in production: cookies only over TLS.
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = os.environ.get("INSECURE_COOKIES", "0") != "1"
    CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    # Before django_tasks_db: its `db_worker` command is replaced by sessions_app's (beats, sweeps, lock-proof).
    "sessions_app",
    "django_tasks_db",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files from the server process itself (compressed, cached forever by hashed name) when DEBUG is off.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Early, so a JSON twin's error from any later layer (CSRF, login, method, view) is answered in JSON.
    "sessions_app.middleware.JsonErrorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "sessions_app.middleware.PrivatePagesMiddleware",
    "sessions_app.middleware.LoginRequiredJsonMiddleware",
    "sessions_app.middleware.StripNulMiddleware",
    "sessions_app.middleware.DatabaseBusyMiddleware",
    "sessions_app.middleware.SessionTooLargeMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "sessions_app.middleware.VaryOnHtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: it answers a locked-out login
]

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one username from one address,
# that pair is locked out for AXES_COOLOFF_TIME hours; a successful login resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("LOGIN_LOCKOUT_HOURS", "0.25"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Transcript content is untrusted: no inline script, no inline handlers, no plugins.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sessions_app.context_processors.navigation",
                "sessions_app.context_processors.agents",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0")),
        conn_health_checks=True,  # a kept connection the server dropped is replaced, not an error page
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; a generous timeout rides out imports. A new database
    # gets 32 KiB pages (before WAL fixes the size; an existing one keeps its own): records are kilobytes of JSON,
    # and with 4 KiB pages most spill into overflow chains; the 53 MB import took 0.08 s less (docs/performance.md).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA page_size=32768; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        # How long a write waits for another's lock before "database is locked"; the worker survives it either way.
        "timeout": float(os.environ.get("SQLITE_BUSY_TIMEOUT_S", "30")),
        "transaction_mode": "IMMEDIATE",
    }
    # The test database is a file, not memory, so a real `db_worker` subprocess can share it with the
    # live server in browser tests.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "sessions:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True


def _local_time_zone() -> str:
    """The machine's own zone, as ccusage takes the system's: ``TZ``, else what /etc/localtime links to, else
    /etc/timezone (Debian), else UTC."""
    named = os.environ.get("TZ", "").lstrip(":").strip()
    if named:
        return named
    try:
        target = os.path.realpath("/etc/localtime")
        if "/zoneinfo/" in target:
            return target.split("/zoneinfo/", 1)[1]
        return Path("/etc/timezone").read_text().strip() or "UTC"
    except OSError:
        return "UTC"


# The zone Usage counts its days, weeks and months in (sessions_app/selectors/usage.py); `--timezone` and the
# page's `tz` choose another per report.
USAGE_TIME_ZONE = os.environ.get("USAGE_TIME_ZONE", "").strip() or _local_time_zone()

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# With DEBUG on (a developer's checkout), WhiteNoise serves static/ itself, so no collectstatic is needed.
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = DEBUG
if not DEBUG:
    # Compressed copies made by `collectstatic` (bin/run runs it), served by WhiteNoise. Not the hashed-name
    # (manifest) storage: it makes every page fail until collectstatic has run, e.g. in benchmarks and tests.
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    }


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise RuntimeError(f"{name} must be a positive whole number, not {value!r}.")
    return int(value)


# `bin/run` (manage.py serve): web server processes x threads, and db_worker processes. The defaults are what the
# load benchmark (bench/load_bench.py, docs/performance.md) measured best on 2 shared cores: one process with 8
# threads had the lowest p95 and memory (each process computes and caches the analyses again); more processes pay
# off with more free cores.
WEB_WORKERS = _int_env("WEB_WORKERS", 1)
WEB_THREADS = _int_env("WEB_THREADS", 8)
# The web server (Waitress, sessions_app/web_server.py) reads requests in its event loop, so a slow client holds a
# connection, not a thread (docs/deployment.md): at most WEB_CONNECTIONS open per web process (gunicorn's default
# worker_connections, which this replaces), and one that sends nothing for WEB_IDLE_TIMEOUT_S is closed (nginx's
# client_header_timeout and client_body_timeout); an upload whose bytes keep coming is never cut.
WEB_CONNECTIONS = _int_env("WEB_CONNECTIONS", 1000)
WEB_IDLE_TIMEOUT_S = _int_env("WEB_IDLE_TIMEOUT_S", 60)
# The one proxy address whose X-Forwarded-Proto is believed ("" believes none); gunicorn's default was the loopback.
WEB_TRUSTED_PROXY = os.environ.get("WEB_TRUSTED_PROXY", "127.0.0.1")
TASK_WORKERS = _int_env("TASK_WORKERS", 1)
BIND = os.environ.get("BIND", "127.0.0.1:8000")
# Logins are read from the process cache, written through to the database (so every process sees them).
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
# Answers of analyses (timeline and diagnosis JSON, the timeline page's data), kept per server process while their
# session is unchanged, for at most this many seconds (sessions_app/process_cache.py); 0 turns it off.
ANALYSIS_CACHE_SECONDS = int(os.environ.get("ANALYSIS_CACHE_SECONDS", "600"))
CACHES = {
    # Per process: rendered transcript pages (keyed by the session's version) and login sessions.
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "OPTIONS": {"MAX_ENTRIES": 200}},
}
# A session counts as live while its last record is this recent; its pages then poll for what the watcher adds.
SESSION_LIVE_SECONDS = _int_env("SESSION_LIVE_SECONDS", 300)
LIVE_POLL_SECONDS = _int_env("LIVE_POLL_SECONDS", 2)
# The watcher imports a change this long after the agent stops writing (an agent writes a turn in a burst).
WATCH_STEP_MS = _int_env("WATCH_STEP_MS", 50)

# Uploads stream to disk past this size instead of being held in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


MIB = 1024 * 1024
# Import limits: nothing is read whole without a cap, and every refusal names the file (and line).
IMPORT_MAX_LINE_BYTES = _env_int("IMPORT_MAX_LINE_BYTES", 32 * MIB)  # a longer line is a line error, never parsed
IMPORT_MAX_LINE_ERRORS = _env_int("IMPORT_MAX_LINE_ERRORS", 1000)  # listed per file; the rest are counted
UPLOAD_MAX_REQUEST_BYTES = _env_int("UPLOAD_MAX_REQUEST_BYTES", 2048 * MIB)  # one upload request, all files
UPLOAD_MAX_ZIP_MEMBERS = _env_int("UPLOAD_MAX_ZIP_MEMBERS", 20_000)
UPLOAD_MAX_MEMBER_BYTES = _env_int("UPLOAD_MAX_MEMBER_BYTES", 1024 * MIB)  # one unpacked file
UPLOAD_MAX_UNZIPPED_BYTES = _env_int("UPLOAD_MAX_UNZIPPED_BYTES", 4096 * MIB)  # all of a zip, unpacked
UPLOAD_MAX_SESSION_FILES = _env_int("UPLOAD_MAX_SESSION_FILES", 5000)  # session files per upload
# Django's own limit on the files of one request is the same number: one limit, named in the refusal
# (sessions_app.views.errors.bad_request), where Django's default of 1,000 refused uploads the setting allowed.
DATA_UPLOAD_MAX_NUMBER_FILES = UPLOAD_MAX_SESSION_FILES
UPLOAD_DIR = Path(os.environ.get("UPLOAD_DIR", VAR_DIR / "uploads"))  # uploads wait here for the worker
# A record with more text than this gets a chars/4 token estimate (labelled): tiktoken's time grows faster than
# linearly on long text without whitespace, and one record must not stall the worker.
TOKEN_ESTIMATE_MAX_CHARS = _env_int("TOKEN_ESTIMATE_MAX_CHARS", 200_000)
# Memory (sessions_app/memory_budget.py): the largest session (its weight: the size of its files, or 1.5 KB per record
# where its records are smaller) a page, a command or a run reads
# whole into memory (a preview, a replay, a call's detail, a run and its export), and the largest the worker analyses
# after an import (the diagnosis and composition pages read what it stored). Measured by bench/memory_bench.py: a
# process holds about 1.5x the session's size for its records, 3x with what pages derive; with these defaults the web
# process stays under 600 MB and the worker under 800 MB (docs/performance.md).
ANALYSIS_MAX_SESSION_BYTES = _env_int("ANALYSIS_MAX_SESSION_BYTES", 128 * MIB)
WORKER_ANALYSIS_MAX_SESSION_BYTES = _env_int("WORKER_ANALYSIS_MAX_SESSION_BYTES", 320 * MIB)

# The worker (manage.py db_worker): it beats every WORKER_HEARTBEAT_S; every WORKER_SWEEP_EVERY_S it sweeps
# what dead workers left (runs, task rows, upload imports, missing token estimates); a worker or run silent
# for STALE_AFTER_S is taken for dead.
WORKER_HEARTBEAT_S = float(os.environ.get("WORKER_HEARTBEAT_S", "10"))
WORKER_SWEEP_EVERY_S = float(os.environ.get("WORKER_SWEEP_EVERY_S", "30"))
STALE_AFTER_S = float(os.environ.get("STALE_AFTER_S", "120"))
# The Anthropic API: seconds one attempt may take in all (connect, wait, stream), and attempts per request.
SUMMARY_ATTEMPT_TIMEOUT_S = float(os.environ.get("SUMMARY_ATTEMPT_TIMEOUT_S", "120"))

ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "")
SUMMARY_MODEL = os.environ.get("SUMMARY_MODEL", "claude-haiku-4-5")

# Prices in USD per million tokens, by model as the logs name it; they win over genai-prices (compaction.costs).
# Keys: input, output (required), cache_read, cache_write_5m, cache_write_1h. A JSON object in MODEL_PRICES
# replaces the defaults. The default covers the one sample model genai-prices does not know: a model served
# locally through LM Studio, which has no per-token price.
MODEL_PRICES: dict[str, dict[str, float | str]] = (
    json.loads(os.environ["MODEL_PRICES"])
    if os.environ.get("MODEL_PRICES")
    else {
        "qwen3-coder-30b-a3b-instruct": {"input": 0, "output": 0, "note": "served locally (LM Studio), no price"},
    }
)

# `bin/run`'s children (LOG_STREAMS=split, set by `manage.py serve`) write records below WARNING to stdout, which
# goes to their log file only (LOG_DIR), and warnings and errors to stderr, which reaches the terminal too: the task
# worker's line per task stays out of sight, a failure does not. Anywhere else every record goes to stderr.
LOG_DIR = Path(os.environ.get("LOG_DIR", VAR_DIR / "log"))


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING


if os.environ.get("LOG_STREAMS", "stderr") == "split":
    # The level and the logger's name: a line in a log file says what kind of line it is.
    _log_handlers: dict[str, dict[str, object]] = {
        "out": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "filters": ["below_warning"]},
        "err": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "level": "WARNING"},
    }
    for _handler in _log_handlers.values():
        _handler["formatter"] = "level"
else:
    _log_handlers = {"console": {"class": "logging.StreamHandler"}}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"below_warning": {"()": _BelowWarning}},
    "formatters": {"level": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "handlers": _log_handlers,
    "root": {"handlers": list(_log_handlers), "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
