"""Azure LLM inference traces (Azure Public Dataset, CC-BY-4.0): the 2023
files (Patel et al., "Splitwise", ISCA 2024) and the 2024 week-long ones
(Stojkovic et al., "DynamoLLM", HPCA 2025) share one layout: ``TIMESTAMP`` as
date-time text (2023: ``2023-11-16 18:15:46.6805900``; 2024: with an offset,
``2024-05-10 00:00:00.009930+00:00``), ``ContextTokens``, ``GeneratedTokens``."""

from slogate.scenarios.datasets.layout import Layout, TraceColumns

LAYOUT = Layout(
    name="azure",
    file_format="csv",
    columns=TraceColumns(
        time="TIMESTAMP", input_tokens="ContextTokens", output_tokens="GeneratedTokens"
    ),
    time_unit="datetime",
)
