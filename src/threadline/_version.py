"""``threadline.__version__``: the installed distribution's version, read from its metadata.

pyproject.toml's ``version`` is the one source; ``threadline --version`` reads the same
metadata. Imported on first access of ``threadline.__version__`` only.
"""

from importlib.metadata import version

__version__ = version("threadline")
