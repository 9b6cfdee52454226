"""The ``/v1`` routes, one module per kind of thing: each mirrors the CLI commands of that kind."""
