"""The ``tickwheel`` command line: server roles delegated to their owners,
client commands over the Python SDK (``tickwheel.Client``).

Entry point: :func:`tickwheel_server.cli.main.main`.
"""
