"""The bundle's entry point: ``ember`` / ``Ember.exe`` / ``Ember.app`` all start here."""

import multiprocessing
import sys

if __name__ == "__main__":
    # A frozen app that spawns a child process re-runs this file; without freeze_support the
    # child would start another Ember instead of the worker it was meant to be.
    multiprocessing.freeze_support()

    from app.cli import main

    sys.exit(main())
