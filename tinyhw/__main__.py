"""``python -m tinyhw``: the same entry point as the ``tinyhw`` command."""

from tinyhw.cli import main

if __name__ == "__main__":
    main()
