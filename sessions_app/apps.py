import gc

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        from django.conf import settings

        from compaction import costs

        # Package price lookups kept across processes: reading genai-prices' tables cost every command and
        # import 0.3-0.8 s (compaction/costs.py).
        costs.use_price_cache(settings.VAR_DIR / "cache" / "prices.json")
        # manage.py starts Django with the cyclic collector off; from here on it runs, and what start-up loaded
        # (modules, classes, settings: never garbage) is frozen out of its way for the life of the process: 0.1-0.2 s
        # of CPU per command (docs/performance.md).
        gc.freeze()
        gc.enable()
