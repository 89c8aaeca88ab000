"""Every HTTP call the tests make through `requests` has a deadline (60 s unless the call sets
its own): a server that hangs fails its test instead of stalling the whole run. Imported by the
test suites' conftest files."""

import requests

DEFAULT_TIMEOUT = 60
_request = requests.Session.request


def _request_with_deadline(self, method, url, **kwargs):
    if kwargs.get("timeout") is None:
        kwargs["timeout"] = DEFAULT_TIMEOUT
    return _request(self, method, url, **kwargs)


requests.Session.request = _request_with_deadline
