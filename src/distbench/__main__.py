"""``python -m distbench`` = the ``distbench`` command."""

from distbench.cli import main

if __name__ == "__main__":
    main()
