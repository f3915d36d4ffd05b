import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# A web process renders transcripts: load the Markdown renderer now, not in its first request (commands,
# which import the views only for the URL check, never load it).
from sessions_app.rendering import warm_up  # noqa: E402

warm_up()
