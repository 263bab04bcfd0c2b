"""``actae console``: the web console and HTTP API over a store (docs/console.md).

Only this room imports the server stack (FastAPI, Starlette, uvicorn, prometheus_client,
python-multipart), the optional extra ``actae[console]``. Every read and action goes through
:mod:`actae.adapters.operate`, as the CLI's do, so both show and do the same things.
"""
