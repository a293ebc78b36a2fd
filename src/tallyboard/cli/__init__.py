"""`tallyboard ...`: the command line, a skin over `ResultTable` methods (main.py), and the demo."""

from tallyboard.cli.main import main

__all__ = ["main"]
