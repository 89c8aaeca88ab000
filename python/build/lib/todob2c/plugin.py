"""The pytest plugin (entry point `pytest11`): the `todob2c_server` fixture (one server for the
session) and `todob2c` (the same server, reset to the seeded tenant after each test)."""

import pytest

from todob2c import TodoB2C


def pytest_addoption(parser):
    group = parser.getgroup("todob2c")
    group.addoption("--todob2c-binary", default=None, help="the todo-server binary (else TODO_SERVER_BIN, else PATH)")


@pytest.fixture(scope="session")
def todob2c_server(request):
    """One todo-server for the test session, on free ports, stopped at its end."""
    server = TodoB2C(binary=request.config.getoption("--todob2c-binary")).start()
    yield server
    server.stop()


@pytest.fixture
def todob2c(todob2c_server):
    """The session's server; after the test, its accounts, outbox, faults and clock are reset."""
    yield todob2c_server
    todob2c_server.reset()
