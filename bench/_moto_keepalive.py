"""moto's S3 served with HTTP keep-alive, for bench/archive.py.

``python -m moto.server`` runs Werkzeug's development server, which answers ``Connection: close``:
every PUT then opens a new TCP connection, which costs the worker's event loop several
milliseconds per record that no real object store (MinIO, AWS S3, Ceph) charges, since they keep
connections open. The same moto application under uvicorn (WSGI interface) keeps them open, so
the bench measures the archive's cost rather than the fake server's.

    python -m bench._moto_keepalive HOST PORT
"""

from __future__ import annotations

import sys

import uvicorn
from moto.server import DomainDispatcherApplication, create_backend_app
from uvicorn.middleware.wsgi import WSGIMiddleware


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    app = WSGIMiddleware(DomainDispatcherApplication(create_backend_app), workers=4)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
