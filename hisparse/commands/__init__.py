"""One module per `hisparse-bench` subcommand (registered in hisparse/cli.py)."""
