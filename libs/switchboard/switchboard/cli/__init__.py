"""The ``switchboard`` command line (entry point: ``switchboard.cli.main:main``)."""
