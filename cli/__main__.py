"""`python -m cli` runs the `chattts-online` command."""

import sys

from cli.main import main

if __name__ == "__main__":
    sys.exit(main())
