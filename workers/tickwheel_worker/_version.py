"""The worker runtime's version, sent in every hello."""

from __future__ import annotations

from importlib import metadata

try:
    VERSION = metadata.version("tickwheel")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    VERSION = "0.0.0+unknown"
