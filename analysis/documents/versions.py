"""The ``schema`` version of each document slogate writes. Kept apart from the
models (``slogate.analysis.documents.contracts``) so that writing a document needs no
pydantic: the load processes import the writers, and every MB there counts
once per process."""

from typing import Final, Literal

# Each version is a type, which the models' ``schema`` field is, and a value,
# which the writers put there: mypy checks that the two say the same.
SummarySchema = Literal["slogate.summary/1"]
SweepSchema = Literal["slogate.sweep/1"]
ExperimentSchema = Literal["slogate.experiment/1"]
RundataSchema = Literal["slogate.rundata/1"]
RepeatsSchema = Literal["slogate.repeats/1"]
TuneSchema = Literal["slogate.tune/1"]

SUMMARY_SCHEMA: Final[SummarySchema] = "slogate.summary/1"
SWEEP_SCHEMA: Final[SweepSchema] = "slogate.sweep/1"
EXPERIMENT_SCHEMA: Final[ExperimentSchema] = "slogate.experiment/1"
RUNDATA_SCHEMA: Final[RundataSchema] = "slogate.rundata/1"
REPEATS_SCHEMA: Final[RepeatsSchema] = "slogate.repeats/1"
TUNE_SCHEMA: Final[TuneSchema] = "slogate.tune/1"
