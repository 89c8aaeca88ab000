"""Samples one URL's latency at a modest fixed rate (default 20 requests per second) over one
keep-alive connection, and prints p50/p99/max: a light probe that measures responsiveness
under another load without adding much load itself."""

import statistics
import sys
import time
import http.client
from urllib.parse import urlparse

url, seconds = sys.argv[1], float(sys.argv[2])
rate = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
parts = urlparse(url)
connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
path = parts.path + ("?" + parts.query if parts.query else "")
samples, errors = [], 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    started = time.monotonic()
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            errors += 1
        samples.append((time.monotonic() - started) * 1000)
    except Exception:
        errors += 1
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    time.sleep(max(0.0, 1.0 / rate - (time.monotonic() - started)))
samples.sort()
p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
print(f"{len(samples)} samples, {errors} errors: p50 {statistics.median(samples):.1f} ms, p99 {p99:.1f} ms, max {samples[-1]:.1f} ms")
