"""One real ``agent serve`` for every test in this folder (the model loads once)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serve_support import Served, start_server, stop_server


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The shared server."""
    served = start_server(tmp_path_factory.mktemp("serve"))
    yield served
    stop_server(served)
