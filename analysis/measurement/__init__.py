"""Measurement: a request's raw timestamps, its metrics, mergeable histograms and percentiles.

The pure path of docs/design.md's measurement contract; everything after it (the verdict,
the diagnosis, the documents) reads numbers made here and never the raw records again.
"""
