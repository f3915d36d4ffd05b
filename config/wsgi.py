import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# A web process loads now what its first request would otherwise wait for (issue 12: the first request
# after a start within 400 ms): the URL configuration with every view, and the Markdown renderer.
# Commands, which import the views only for the URL check, never load the renderer.
from django.urls import get_resolver  # noqa: E402

from sessions_app.rendering import warm_up  # noqa: E402

get_resolver().url_patterns  # noqa: B018  (imports config.urls and every view module)
warm_up()
