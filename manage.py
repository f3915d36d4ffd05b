#!/usr/bin/env python
import gc
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # Django's start-up (some 700 modules) allocates objects by the hundred thousand and frees few of them: the
    # cyclic collector, run every 700 allocations, only walked them again and again. It is off until the applications
    # are ready; SessionsAppConfig.ready turns it back on. With the freeze below: 0.03-0.10 s of CPU per command
    # (docs/performance.md).
    gc.disable()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
    # The command is done and the process ends: the interpreter's last cyclic collection would walk every object
    # still alive (Django's, the command's caches) only to free them, which reference counting does anyway. Frozen,
    # they are skipped (docs/performance.md).
    gc.freeze()


if __name__ == "__main__":
    main()
