"""The verdict and the gate: SLOs against the run, the baseline, the generator, the exit code.

Every output shows the verdict made here (analysis/verdict/judge.py); none judges on its own.
"""
