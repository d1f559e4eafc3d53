"""The validated form of a scenario file and of the requests it plans.

These types are the contract between ``scenarios/`` (which builds them from
YAML and synthesizes the traffic) and the rooms after it: the load side reads
``load``, ``request`` and ``timeouts`` and sends the planned turns; analysis
reads ``slo``. Durations are seconds, latencies milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

Api = Literal["chat", "completions", "responses", "messages", "embeddings"]
Arrival = Literal["poisson", "gamma", "constant", "trace"]


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    """One request to send. For chat the load side sends the conversation's
    history (with the assistant's actual replies) followed by ``user_text``;
    for completions it sends ``prompt`` alone. ``history``, when set, is the
    recorded history as ``(role, text)`` pairs: it is sent instead of the
    actual replies (a replayed conversation with ``history: recorded``)."""

    scenario: str
    conversation: int
    turn: int
    user_text: str
    max_tokens: int
    intended_input_tokens: int
    intended_output_tokens: int
    system_text: str | None = None
    think_time_s: float = 0.0
    arrival_s: float | None = None  # open loop: offset from the start of the run
    prefix_id: str | None = None
    history: tuple[tuple[str, str], ...] | None = None
    inputs: tuple[str, ...] = ()  # embeddings: the batch of texts one request embeds
    # agents: how long each tool call of this turn takes to answer, in order
    tool_latencies_s: tuple[float, ...] = ()
    images: tuple[str, ...] = ()  # vision: data: URLs sent with the user text
    # cancelled requests: the client closes the connection this long after the
    # send, or once this many output tokens arrived (None: never)
    cancel_after_s: float | None = None
    cancel_after_tokens: int | None = None
    # structured outputs: None in a scenario without them; else this request's
    # response_format (None: sent unconstrained, kept apart as such)
    constraint: Constraint | None = None

    @property
    def prompt(self) -> str:
        return self.user_text if self.system_text is None else self.system_text + self.user_text


@dataclass(frozen=True, slots=True)
class Constraint:
    """A request's structured-output constraint: the ``response_format`` sent
    (None: this request goes unconstrained, beside the constrained ones) and
    ``key``, the identity of its schema as an engine's grammar cache sees it."""

    response_format: dict[str, Any] | None = None
    key: str = ""


@dataclass(frozen=True, slots=True)
class Conversation:
    """A session a closed-loop user plays: its turns in order."""

    scenario: str
    index: int
    turns: tuple[PlannedTurn, ...]


@dataclass(frozen=True, slots=True)
class RateSpec:
    rps: float
    arrival: Arrival = "poisson"
    cv: float = 1.0  # gamma arrivals: coefficient of variation of inter-arrival gaps


@dataclass(frozen=True, slots=True)
class Stage:
    """One step of a load shape; each stage gets its own histograms."""

    name: str
    duration_s: float
    users: int | None = None
    spawn_rate: float | None = None
    rate: RateSpec | None = None


@dataclass(frozen=True, slots=True)
class LoadSpec:
    users: int | None = None  # closed loop
    spawn_rate: float | None = None
    rate: RateSpec | None = None  # open loop
    duration_s: float = 60.0
    warmup_s: float = 0.0
    warmup_auto: bool = False  # ``warmup: auto``: the cut is found after the run
    stages: tuple[Stage, ...] = ()
    max_in_flight: int = 1024
    max_lag_ms: float = 50.0

    @property
    def open_loop(self) -> bool:
        return self.rate is not None


# Engines (their /v1/models ``owned_by``) that send per-chunk usage when asked.
PER_CHUNK_USAGE_ENGINES = ("vllm",)


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """What goes into every request body beside the messages."""

    include_usage: bool = True
    # per-chunk usage (vLLM's stream_options.continuous_usage_stats), or "auto":
    # asked of the engines known to send it, settled by `for_engine`
    continuous_usage: bool | Literal["auto"] = "auto"
    ignore_eos: bool = False
    min_tokens: bool = False
    temperature: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    api_key_env: str = "OPENAI_API_KEY"
    # how prompt lengths are counted: "local" (the bundled SmolLM2 tokenizer),
    # the absolute path of another tokenizer.json,
    # "server" (a counter the load side injects, e.g. the engine's /tokenize),
    # or "estimate" (calibrated chars per token)
    tokenizer: str = "local"
    # reasoning inside the content (a server without a reasoning parser): the
    # opening and closing tags, or None to take all content as answer; and
    # whether the chat template opens the block itself (only the close streams)
    think_tags: tuple[str, str] | None = ("<think>", "</think>")
    think_starts_inside: bool = False
    # tool definitions sent with every request: {"name", "description", "parameters"}
    tools: tuple[dict[str, Any], ...] = ()
    # behind a router: the response header naming the replica that served a
    # request, and the router's session header, sent back on a conversation's
    # later turns so they stay on its replica (docs/load.md, "Behind a router");
    # and a header the client fills with its own id of each conversation, on
    # every turn (Dynamo's X-Dynamo-Session-ID); or the router's session
    # cookie (llm-d's llm-d-session), sent back in a Cookie header
    served_by_header: str | None = None
    session_header: str | None = None
    session_id_header: str | None = None
    session_cookie: str | None = None
    # headers sent as written with every request (a traffic class's)
    headers: tuple[tuple[str, str], ...] = ()

    def for_engine(self, owned_by: str) -> RequestOptions:
        """These options with ``continuous_usage: auto`` settled for the engine
        that announced itself as ``owned_by`` (``/v1/models``): on where it is
        known to send per-chunk usage, whose exact tokens per chunk keep ITL's
        tail true when the engine merges a lagging stream's tokens into one
        chunk (docs/engines.md, vLLM); off elsewhere, where an unknown
        ``stream_options`` field may be refused."""
        if self.continuous_usage != "auto":
            return self
        return replace(self, continuous_usage=owned_by in PER_CHUNK_USAGE_ENGINES)


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """One of a scenario's ``endpoints:``: its name, base URL and weight."""

    name: str
    url: str
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 10.0
    first_token_s: float = 120.0
    stall_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Threshold:
    """One SLO: ``metric`` (ttft_ms, itl_ms, tpot_ms, e2e_ms, the answer's
    ttfa_ms, reasoning_ms, answer_itl_ms, answer_tpot_ms, the per-request
    counts reasoning_tokens, answer_tokens, output_tokens, error_rate,
    requests_per_s, output_tokens_per_s, goodput, schema_validity) at ``stat`` (p50..p999, max,
    mean, rate, min) must be <= ``limit`` (``kind == "max"``) or >= it (``"min"``)."""

    metric: str
    stat: str
    limit: float
    kind: Literal["max", "min"] = "max"


@dataclass(frozen=True, slots=True)
class GoodputSpec:
    min_fraction: float | None = None
    ttft_ms: float | None = None
    ttfa_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None


@dataclass(frozen=True, slots=True)
class SloSpec:
    thresholds: tuple[Threshold, ...] = ()
    goodput: GoodputSpec | None = None


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """Images per request (with the first turn of a conversation), made locally
    at one resolution and format."""

    count: int
    width: int
    height: int
    format: str = "jpeg"


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An agent loop: the client answers each tool call after the tool's latency
    (a distribution in seconds) and sends the next step, until the model answers
    without a tool call or ``max_steps`` requests were sent."""

    max_steps: int
    tool_latency_s: Any  # scenarios' own distribution object


@dataclass(frozen=True, slots=True)
class CancelSpec:
    """Requests the client cancels (users close the tab, agents abort): each
    request is cancelled with probability ``share``, after a delay from its
    send (``after_s``, a distribution in seconds) or after a number of output
    tokens (``after_tokens``, a distribution); exactly one of the two is set."""

    share: float
    after_s: Any = None  # scenarios' own distribution object
    after_tokens: Any = None


@dataclass(frozen=True, slots=True)
class TrafficClass:
    """Who a mix member's requests are, as the engine and its gateway see
    them: vLLM's ``priority`` (lower first) and other body fields, headers
    (llm-d's objective and fairness id), and the SLOs this class is held to.
    The load side only sends them; the class is judged as its member's
    scenario, by ``slo``."""

    name: str
    priority: int | None = None
    body: dict[str, Any] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()
    slo: SloSpec | None = None


@dataclass(frozen=True, slots=True)
class StructuredSpec:
    """Structured outputs (``response_format``) on a ``share`` of requests:
    ``format`` json_schema or json_object; the schemas drawn from a file's
    (``schemas``) or from ``pool`` generated ones, or with ``pool`` 0 a new
    generated schema per request, which no grammar cache can have seen."""

    share: float
    format: Literal["json_schema", "json_object"] = "json_schema"
    schemas: tuple[dict[str, Any], ...] = ()
    pool: int = 8


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario. ``source`` is the file it came from and ``raw`` the
    mapping as written, kept so the report can show the scenario as run."""

    name: str
    api: Api
    model: str
    workload: Any  # scenarios' own workload object; see scenarios.workloads
    load: LoadSpec
    request: RequestOptions
    timeouts: Timeouts
    slo: SloSpec
    seed: int = 0
    weight: float = 1.0
    # the simulated engine's profile when no --host is given (a reasoning model)
    engine_profile: str | None = None
    agent: AgentSpec | None = None
    images: ImageSpec | None = None
    cancel: CancelSpec | None = None
    structured: StructuredSpec | None = None
    # named sets of SLOs beside the gating ``slo``: a sweep reports the most load under each
    slo_tiers: tuple[tuple[str, SloSpec], ...] = ()
    # several endpoints of one deployment (docs/load.md, "Several endpoints")
    endpoints: tuple[EndpointSpec, ...] = ()
    # a mix member's traffic class (docs/scenarios.md, "Priority classes")
    traffic_class: TrafficClass | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
