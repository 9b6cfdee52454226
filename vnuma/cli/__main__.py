"""``python -m vnuma.cli``."""

from vnuma.cli import main

main()
