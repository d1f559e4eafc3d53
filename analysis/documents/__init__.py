"""The documents a run writes and reads back: summary.json, the run data, exports, history.

Their shapes are typed contracts (contracts.py) with a schema version each (versions.py);
text from outside is neutralised (neutral.py) before any output shows it.
"""
