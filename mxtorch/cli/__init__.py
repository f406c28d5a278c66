"""The ``mxtorch`` command line: one module per subcommand, wired by :mod:`mxtorch.cli.main`."""
