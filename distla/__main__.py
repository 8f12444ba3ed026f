"""``python -m distla demo | scaling | launch``: the tools' command line (distla/tools/cli.py)."""

import sys

from distla.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
