"""``python -m swarm_evo.cli``: the ``swarm-evo`` command."""

import sys

from swarm_evo.cli.commands import main

sys.exit(main())
