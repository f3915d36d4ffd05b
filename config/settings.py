"""Settings, driven by the environment.

DATABASE_URL     switches from SQLite (var/db.sqlite3) to e.g. PostgreSQL.
SECRET_KEY       required when DEBUG is off.
ANTHROPIC_API_KEY enables real summaries; without it the offline summarizer is used.
"""

import json
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
    "django_tasks_db",
    "sessions_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "sessions_app.middleware.LoginRequiredJsonMiddleware",
    "sessions_app.middleware.StripNulMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "sessions_app.middleware.VaryOnHtmxMiddleware",
]

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
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; a generous timeout rides out imports.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "timeout": 30,
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

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

# Uploads stream to disk past this size instead of being held in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FILES = 1000

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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
