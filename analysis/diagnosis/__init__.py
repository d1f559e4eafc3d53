"""Diagnosis: why an SLO missed, read from the client's data, confirmed by the engine's.

Each path names a cause with its numbers and what to try (a finding); a new diagnosis rule
is a new path here.
"""
