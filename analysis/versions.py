"""The ``schema`` version of each document slogate writes. Kept apart from the
models (``slogate.analysis.contracts``) so that writing a document needs no
pydantic: the load processes import the writers, and every MB there counts
once per process."""

SUMMARY_SCHEMA = "slogate.summary/1"
SWEEP_SCHEMA = "slogate.sweep/1"
EXPERIMENT_SCHEMA = "slogate.experiment/1"
RUNDATA_SCHEMA = "slogate.rundata/1"
REPEATS_SCHEMA = "slogate.repeats/1"
