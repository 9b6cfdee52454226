"""The HTTP API of ``vnuma serve``: the CLI's commands and JSON documents, behind bearer tokens and roles.

Layout: :mod:`.app` builds the application and its routes, :mod:`.bodies`
the request bodies (the CLI options by their long names), :mod:`.auth` the
token check and the roles, :mod:`.problems` the RFC 9457 error bodies and
the status of each error class, :mod:`.limits` the body-size and request-rate
limits. Every route calls the same service and answers with the same
document (:mod:`vnuma.documents`) as the CLI command it mirrors.
"""
