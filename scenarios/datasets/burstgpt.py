"""BurstGPT (Azure OpenAI GPT usage at a campus, 2023): CSV with ``Timestamp``
in seconds from the trace's start, ``Model``, ``Request tokens``, ``Response
tokens``, ``Total tokens`` and ``Log Type``. A failed request is a row with 0
response tokens; ``failed: keep | skip`` decides whether it is replayed, and
``models: [ChatGPT]`` keeps the rows of some models only."""

from slogate.scenarios.datasets.layout import Layout, TraceColumns

LAYOUT = Layout(
    name="burstgpt",
    file_format="csv",
    columns=TraceColumns(
        time="Timestamp",
        input_tokens="Request tokens",
        output_tokens="Response tokens",
        model="Model",
    ),
    time_unit="s",
)
