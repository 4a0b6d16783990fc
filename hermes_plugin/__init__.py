"""Mimir for Hermes Agent: a MemoryProvider plugin (``memory.provider: mimir``).

Installed into ``$HERMES_HOME/plugins/mimir/`` by ``mimir setup hermes``. Hermes 0.19 loads memory
providers only from such folders (not from package entry points), so this file is a shim: the
provider itself, ``MimirMemoryProvider``, lives in the ``mimir-lessons`` package, which must be
installed in the Python environment Hermes runs in.
"""

# mimir-lessons: hermes plugin (this marker lets `mimir uninstall hermes` recognise the folder)

import logging
from pathlib import Path
from typing import Any


def register(ctx: Any) -> None:
    """Called by Hermes with a collector: hand it Mimir's MemoryProvider."""
    try:
        from mimir_integrations.hermes import MimirMemoryProvider
    except ImportError as exc:
        import sys

        logging.getLogger("mimir.hermes").warning(
            "Mimir memory provider unavailable (%s); install it into Hermes' Python: "
            "%s -m pip install 'mimir-lessons[hermes]'",
            exc,
            sys.executable,
        )
        return
    ctx.register_memory_provider(MimirMemoryProvider(plugin_dir=Path(__file__).parent))
