"""The streaming client: HTTP connections, SSE and each endpoint protocol's reader.

One request in, one record out; it knows nothing of Locust, so the Locust users,
the selftest and the benches all send through it.
"""
