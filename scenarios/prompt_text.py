"""Real text for prompts, cut to an exact number of tokens.

Prompts are made of real prose (the documentation that ships with Python,
``pydoc_data.topics``) and real code (the standard library's own modules), so
an engine sees natural token statistics and works offline. A corpus is
tokenized once per process; a passage of exactly ``n`` tokens is then a slice
between two word boundaries that tokenize the same alone as in context, which
costs microseconds instead of a tokenizer call per request.

Parts of a prompt are joined at single newlines (a prefix ends with ``\\n``, a
suffix starts with one), so token counts of the parts add up exactly.
"""

from __future__ import annotations

import functools
import itertools
import re
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Tokenizer

from slogate.scenarios.cache import cache_dir, key_of, store
from slogate.scenarios.limits import MAX_TOKENS

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"
LOCAL_TOKENIZER = DATA_DIR / "tokenizers" / "smollm2-135m" / "tokenizer.json"
CORPORA = ("prose", "code")
CORPUS_CACHE_VERSION = b"tokenized-corpus/1"  # bump when the boundaries are computed differently
CODE_CORPUS_CHARS = 600_000
CALIBRATION_CHARS = 50_000
CALIBRATION_PASSAGES = 40
JOIN = "\n"
FIT_ROUNDS = 10
# No tokenizer counts an eighth of the local one's tokens in the same text: a
# fit that needs a longer passage has a measure it cannot trust.
FIT_MOST = 8
TRIM_ROUNDS = 48  # twice the bisections 16M words need
_SPACE_RE = re.compile(r"\s")
_LINE_START = re.compile(r"\n(?=\S)")
_WORD_END = re.compile(r"(?<=\S)\s")


@functools.cache
def whitespace_codes() -> np.ndarray:
    """The code points below U+3001 that are whitespace (made once, when first needed)."""
    import numpy as np

    return np.array([c for c in range(0x3001) if chr(c).isspace()], dtype=np.uint32)


TokenCounter = Callable[[str], int]


@functools.cache
def corpus_text(kind: str) -> str:
    """The whole text of a corpus: ``prose`` or ``code``."""
    return _prose() if kind == "prose" else _code()


def _prose() -> str:
    from pydoc_data import topics

    return JOIN.join(topics.topics[key].strip() for key in sorted(topics.topics))


def _code() -> str:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if not p.name.startswith("_"))
    parts: list[str] = []
    size = 0
    for path in files:
        source = path.read_text(encoding="utf-8", errors="replace").strip()
        parts.append(source)
        size += len(source)
        if size >= CODE_CORPUS_CHARS:
            break
    if not parts:
        raise RuntimeError(f"no standard-library sources under {stdlib} to use as code text")
    return JOIN.join(parts)


@functools.lru_cache(maxsize=4)
def load_tokenizer(path: str) -> Tokenizer:
    return Tokenizer.from_file(path)


def tokenizer_counter(path: str) -> TokenCounter:
    """Counts tokens of text (no special tokens) with a ``tokenizer.json``."""
    tokenizer = load_tokenizer(path)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def count_batch(path: str, texts: Sequence[str]) -> list[int]:
    """Token counts of many texts (no special tokens) in one parallel call."""
    encodings = load_tokenizer(path).encode_batch_fast(list(texts), add_special_tokens=False)
    return [len(e.ids) for e in encodings]


@dataclass(frozen=True, slots=True, eq=False)
class TokenizedCorpus:
    """A corpus with its token boundaries. ``char_at[k]`` is where token ``k``
    starts (``char_at[-1]`` is the end); ``starts`` lists tokens a passage may
    begin with (a word starting a line) and ``ends[k]`` says a passage may stop
    before token ``k`` (a word start after a non-space)."""

    text: str
    char_at: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    join_tokens: int

    @property
    def tokens(self) -> int:
        return len(self.char_at) - 1

    def passage(self, rng: np.random.Generator, n: int, exact: bool = True) -> str:
        """Text of exactly ``n`` tokens (``n >= 1``), joined from several slices
        when ``n`` is large compared with the corpus. Not ``exact``: the slice
        keeps its start for any ``n`` and ends at the first clean end after
        ``n`` tokens, so resizing it changes only its tail."""
        return JOIN.join(self._slice(rng, size, exact) for size in _piece_sizes(n, self))

    def _slice(self, rng: np.random.Generator, n: int, exact: bool) -> str:
        import numpy as np

        last = int(np.searchsorted(self.starts, self.tokens - n, side="right"))
        first = int(rng.random() * last)
        if not exact:
            i = int(self.starts[first])
            end = i + n + int(np.argmax(self.ends[i + n :]))
            return self.text[self.char_at[i] : self.char_at[end]]
        for j in itertools.chain(range(first, last), range(first)):
            i = int(self.starts[j])
            if self.ends[i + n]:
                return self.text[self.char_at[i] : self.char_at[i + n]]
        raise RuntimeError(f"the corpus has no passage of exactly {n} tokens")


@dataclass(frozen=True, slots=True, eq=False)
class EstimatedCorpus:
    """A corpus measured by a calibrated chars-per-token ratio instead of a tokenizer."""

    text: str
    chars_per_token: float
    line_starts: np.ndarray
    join_tokens: int = 1

    @property
    def tokens(self) -> int:
        return int(len(self.text) / self.chars_per_token)

    def count(self, text: str) -> int:
        return max(1, round(len(text) / self.chars_per_token)) if text else 0

    def passage(self, rng: np.random.Generator, n: int, exact: bool = True) -> str:
        """About ``n`` tokens of text (never exact, whatever ``exact`` says)."""
        del exact
        return JOIN.join(self._slice(rng, size) for size in _piece_sizes(n, self))

    def _slice(self, rng: np.random.Generator, n: int) -> str:
        import numpy as np

        length = max(1, round(n * self.chars_per_token))
        last = int(np.searchsorted(self.line_starts, len(self.text) - 2 * length, side="right"))
        start = int(self.line_starts[int(rng.random() * max(last, 1))])
        end = _SPACE_RE.search(self.text, start + length)
        return self.text[start : end.start() if end else len(self.text)].rstrip()


Corpus = TokenizedCorpus | EstimatedCorpus


def _piece_sizes(n: int, corpus: Corpus) -> list[int]:
    """Sizes of the slices making an ``n``-token passage: one slice unless ``n``
    exceeds a quarter of the corpus; joins take ``join_tokens`` each."""
    most = max(1, corpus.tokens // 4)
    pieces = 1
    while n - (pieces - 1) * corpus.join_tokens > pieces * most:
        pieces += 1
    body = n - (pieces - 1) * corpus.join_tokens
    return [body // pieces + (1 if i < body % pieces else 0) for i in range(pieces)]


@functools.lru_cache(maxsize=8)
def tokenized_corpus(kind: str, tokenizer_path: str) -> TokenizedCorpus:
    """A corpus with its token boundaries, once per process: from the cache when
    this text was tokenized with this tokenizer file before (milliseconds),
    else tokenized now (a second, and tens of megabytes of transient buffers
    in every load process) and cached."""
    import numpy as np

    text = corpus_text(kind)
    key = key_of(
        CORPUS_CACHE_VERSION,
        Path(tokenizer_path).read_bytes(),
        text.encode("utf-8", "surrogatepass"),
    )
    path = cache_dir("corpora") / f"{kind}-{key}.npz"
    cached = _cached_corpus(path, text)
    if cached is not None:
        return cached
    corpus = _tokenize_corpus(text, load_tokenizer(tokenizer_path))
    store(
        path,
        lambda f: np.savez(
            f,
            join_tokens=np.int64(corpus.join_tokens),
            char_at=corpus.char_at,
            starts=corpus.starts,
            ends=corpus.ends,
        ),
    )
    return corpus


def _cached_corpus(path: Path, text: str) -> TokenizedCorpus | None:
    """The cached boundaries of ``text``, or None when absent or not of its shape."""
    import numpy as np

    try:
        with np.load(path) as saved:
            char_at, starts, ends = saved["char_at"], saved["starts"], saved["ends"]
            join_tokens = int(saved["join_tokens"])
    except (OSError, KeyError, ValueError, EOFError):  # absent, damaged, another layout
        return None
    tokens = len(char_at) - 1
    if tokens < 1 or int(char_at[-1]) != len(text) or len(ends) != tokens + 1:
        return None
    if len(starts) and not 0 <= int(starts.min()) <= int(starts.max()) < tokens:
        return None
    return TokenizedCorpus(text, char_at, starts, ends, join_tokens)


def _tokenize_corpus(text: str, tokenizer: Tokenizer) -> TokenizedCorpus:
    # encode_batch releases the GIL (encode does not): a load process tokenizes
    # in a thread while its event loop keeps serving (heartbeats, streams).
    import numpy as np

    encoding = tokenizer.encode_batch([text], add_special_tokens=False)[0]
    offsets = np.array(encoding.offsets, dtype=np.int64)
    words = np.array([-1 if w is None else w for w in encoding.word_ids], dtype=np.int64)
    word_start = np.r_[True, words[1:] != words[:-1]] & (words >= 0)
    char_at = np.append(offsets[:, 0], len(text))
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    space = np.append(np.isin(codes, whitespace_codes()), True)  # the end acts as whitespace
    line_start = np.r_[True, codes[:-1] == ord("\n")]
    first = char_at[:-1]
    ends = np.append(word_start, True) & ~space[np.maximum(char_at - 1, 0)]
    join_tokens = len(tokenizer.encode(JOIN, add_special_tokens=False))
    return TokenizedCorpus(
        text=text,
        char_at=char_at,
        starts=np.flatnonzero(word_start & ~space[first] & line_start[first]),
        ends=ends,
        join_tokens=join_tokens,
    )


@functools.cache
def estimated_corpus(kind: str) -> EstimatedCorpus:
    """A corpus with chars per token calibrated by the local tokenizer on
    passages cut the way the planner cuts them (from line starts, 100 to 8000
    tokens): where passages start and how long they run changes the ratio."""
    import numpy as np

    text = corpus_text(kind)
    line_starts = np.array([0] + [m.end() for m in _LINE_START.finditer(text)], dtype=np.int64)
    count = tokenizer_counter(str(LOCAL_TOKENIZER))
    rough = EstimatedCorpus(
        text, len(text[:CALIBRATION_CHARS]) / count(text[:CALIBRATION_CHARS]), line_starts
    )
    rng = np.random.default_rng(0)
    sizes = np.exp(rng.uniform(np.log(100), np.log(8000), CALIBRATION_PASSAGES)).astype(int)
    ratios = [len(p) / count(p) for p in (rough.passage(rng, int(n)) for n in sizes)]
    return EstimatedCorpus(text, float(np.median(ratios)), line_starts)


class Writer:
    """Composes prompt text of a wanted token count: ``prefix + passage + suffix``.

    With the corpus' own tokenizer (or the estimate), ``local``, the parts' counts
    add up, so a prompt costs one short count of its prefix and suffix. With an
    injected ``measure`` (e.g. the engine's ``/tokenize``) the local count makes
    the first guess, then the whole text is measured and the passage resized
    until the measure matches (at most ``FIT_ROUNDS`` measurements).
    """

    def __init__(self, corpus: Corpus, local: TokenCounter, measure: TokenCounter | None) -> None:
        self.corpus = corpus
        self.local = local
        self.measured = measure is not None
        self.count = measure or local

    def fill(
        self,
        rng: np.random.Generator,
        total: int,
        prefix: str = "",
        suffix: str = "",
        prefix_tokens: int | None = None,
    ) -> tuple[str, int]:
        """Text of ``total`` tokens and its count (larger when the prefix and
        suffix alone exceed ``total``: the passage keeps at least one token)."""
        fixed = (self.local(prefix) if prefix_tokens is None else prefix_tokens) + (
            self.local(suffix) if suffix else 0
        )
        size = max(1, total - fixed)
        if not self.measured:
            return prefix + self.corpus.passage(rng, size) + suffix, fixed + size
        return self._fit(int(rng.integers(0, 2**63)), total, size, prefix, suffix)

    def trim(self, text: str, tokens: int) -> tuple[str, int] | None:
        """``text`` without (at least) its last ``tokens`` tokens, cut at a
        whitespace so the rest keeps whole words, and how many tokens it lost;
        None when nothing of it would be left. Its start stays byte-identical, so
        a trimmed prompt still shares its prefix with those it shared it with.
        Word ends are searched by interpolation on their counts, bisecting every
        other step so the bracket halves at worst."""
        total = self.count(text)
        want = total - tokens
        if want < 1:
            return None
        ends = [m.start() for m in _WORD_END.finditer(text)]
        low, low_count, high, high_count = -1, 0, len(ends), total  # ends[len] is the end
        best: tuple[str, int] | None = None
        for step in range(TRIM_ROUNDS):
            if high - low <= 1:
                break
            if step % 2 == 0:
                probe = low + round((high - low) * (want - low_count) / (high_count - low_count))
            else:
                probe = (low + high) // 2
            probe = min(max(probe, low + 1), high - 1)
            count = self.count(text[: ends[probe]])
            if count <= want:
                low, low_count, best = probe, count, (text[: ends[probe]], total - count)
            else:
                high, high_count = probe, count
        return best

    def _fit(self, seed: int, total: int, size: int, prefix: str, suffix: str) -> tuple[str, int]:
        """Resize the passage until the whole text measures ``total``: first the
        local exact passage (right at once when the measure agrees with the local
        tokenizer), then one fixed start with a longer or shorter tail, whose
        measure only grows with its size: secant steps until ``total`` is
        bracketed, then interpolation and bisection in turn. The closest try
        wins when ``total`` cannot be hit exactly."""
        import numpy as np

        best: tuple[int, str, int] | None = None
        points: list[tuple[int, int]] = []  # (size, count) of fixed-start tries
        most = _most_size(total)
        for attempt in range(FIT_ROUNDS):
            exact = attempt == 0
            passage = self.corpus.passage(np.random.default_rng(seed), size, exact=exact)
            text = prefix + passage + suffix
            count = self.count(text)
            if best is None or abs(count - total) < best[0]:
                best = (abs(count - total), text, count)
            if count == total or (size == 1 and count > total):
                break
            if not exact:
                points.append((size, count))
            following = _next_size(points, size, count, total)
            if following is None or (following > most and size == most):
                break
            size = min(following, most)
        assert best is not None  # FIT_ROUNDS >= 1
        return best[1], best[2]


def _most_size(total: int) -> int:
    """The longest passage (in the local count) a fit tries for ``total``
    measured tokens: FIT_MOST times as many, never past MAX_TOKENS. However
    the measure counts (a hostile ``/tokenize``), the text stays that small."""
    return min(MAX_TOKENS, FIT_MOST * max(total, 1))


def _next_size(points: list[tuple[int, int]], size: int, count: int, total: int) -> int | None:
    """The next passage size to try, or ``None`` when no size can do better."""
    below = [p for p in points if p[1] < total]
    above = [p for p in points if p[1] > total]
    if below and above:
        low, high = max(below), min(above)
        if high[0] - low[0] <= 1:
            return None
        if len(points) % 2:  # interpolate, bisect every other time so the bracket halves
            guess = low[0] + (total - low[1]) * (high[0] - low[0]) / (high[1] - low[1])
        else:
            guess = (low[0] + high[0]) / 2
        return min(max(round(guess), low[0] + 1), high[0] - 1)
    slope = 1.0
    if len(points) >= 2 and points[-1][0] != points[-2][0]:
        slope = (points[-1][1] - points[-2][1]) / (points[-1][0] - points[-2][0])
        slope = min(max(slope, 0.1), 10.0)
    step = round((total - count) / slope) or (1 if total > count else -1)
    return max(1, size + step)


def tokenizer_file(setting: str) -> str:
    """The ``tokenizer.json`` a ``request.tokenizer`` setting counts with: the
    bundled SmolLM2 one for ``local`` and ``server``, else the file it names."""
    return str(LOCAL_TOKENIZER) if setting in ("local", "server") else setting


def make_writer(corpus: str, tokenizer: str, count_tokens: TokenCounter | None) -> Writer:
    """The writer for a corpus under a scenario's ``request.tokenizer`` setting:
    positions and counts from its tokenizer file (:func:`tokenizer_file`), or
    the calibrated ``estimate``. An injected ``count_tokens`` becomes the measure."""
    if tokenizer == "estimate":
        estimated = estimated_corpus(corpus)
        return Writer(estimated, estimated.count, count_tokens)
    local = tokenizer_file(tokenizer)
    return Writer(tokenized_corpus(corpus, local), tokenizer_counter(local), count_tokens)


def output_token_counter(tokenizer: str) -> TokenCounter | None:
    """What the load side counts generated text with when the server sends no
    usage: the tokenizer file a scenario names (the model's own), else nothing.
    The bundled SmolLM2 tokenizer would count another model's text wrongly."""
    return None if tokenizer in ("local", "server", "estimate") else tokenizer_counter(tokenizer)


def nonce(rng: np.random.Generator) -> str:
    """A 48-bit hex tag that makes a prompt's start unique (no accidental prefix hits)."""
    return f"{int(rng.integers(0, 2**48)):012x}"
