"""``mimir ui``: a local web app over the store: what agents learned, and why.

Server-rendered (Starlette + Jinja2), charts drawn as SVG on the server, a little vanilla JS for
live updates; everything is served locally. Importing this package is light: the web stack loads
in :func:`mimir_integrations.ui.app.create_app`.
"""
