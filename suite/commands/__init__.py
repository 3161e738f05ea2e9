"""``qconform`` subcommands, one module each (``register(subparsers)``)."""
