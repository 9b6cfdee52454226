"""``python -m vnuma``."""

from vnuma.cli import main

main()
