"""What the engine, its router and the GPUs say of themselves, under canonical names.

The client's numbers are the measurement; these confirm or explain them. A new engine-side
metric is a new name in server_metrics.py.
"""
