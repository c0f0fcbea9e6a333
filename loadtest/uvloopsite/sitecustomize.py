"""Runs ``tickwheel server`` on uvloop: on ``PYTHONPATH`` of a benchmark's
server processes (``_harness.server_loop``, ``--loop uvloop``), nothing else.

Every other process started with this folder on its path (the floor,
workers, the benchmark's own helpers) keeps asyncio's loop. uvloop is no
dependency of ours: it must be importable (e.g. from a ``pip install
--target`` folder also on ``PYTHONPATH``).
"""

import os
import sys

if os.path.basename(sys.argv[0]) == "tickwheel" and sys.argv[1:2] == ["server"]:
    import asyncio

    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # asyncio.run's loop is the policy's
