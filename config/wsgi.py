import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# A web process loads now what its first requests would otherwise wait for: the URL configuration with every
# view, the Markdown renderer, the templates (sessions_app/warmup.py).
from sessions_app.warmup import warm_up  # noqa: E402

warm_up()
