"""``python -m worker.cli``: the same command line as the ``research-worker`` script."""

from worker.cli import main

# Guarded, so that importing every module (the image's build does, to find one left out of the
# wheel) does not run the command line.
if __name__ == "__main__":
    raise SystemExit(main())
