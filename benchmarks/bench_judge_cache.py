"""The judge's cost per 1,000 judged pairs with and without its cached prefix (issue 23).

1,000 pairs (one task, --cases cases, two models, answers of --answer-chars characters) judged
in both orders, 2,000 calls, against a loopback provider that keeps a prompt cache and reports
cached tokens in its own wire shape (tests/prompt_cache_server.py: Anthropic's
cache_read/cache_creation_input_tokens for a prefix marked with cache_control, OpenAI's
prompt_tokens_details.cached_tokens and Gemini's cachedContentTokenCount for the longest
prefix seen before, in 128-token blocks; every cache from 1,024 tokens). Each provider's
judge is priced at its shipped list price, cache rates included. Three ways:

- no cache: the server caches nothing (every input token at the input rate);
- before: prompt template 2 (the rubric after the task prompt, no marker), as the judge sent
  it until issue 23; OpenAI's and Gemini's automatic caches can still share the system text,
  task prompt and rubric between the two orders of one pair;
- after: template 3 (the instructions, reply format and rubric first, as the system text,
  marked for Anthropic), the plugin's judge request.

The cost is what the run's judge calls were charged (the dispatcher's cost, from the usage
the server reported); "reads" counts calls that read cached input. Requests go out through
the session's dispatcher at its default width (8); the simulated cache takes them one at a
time, so only the first request with a prefix writes it (a real provider may miss on the first
few sent together). Numbers for closing notes, never thresholds in tests.

    python benchmarks/bench_judge_cache.py [--cases 1000] [--rubric-chars 300 6000]
        [--answer-chars 1200] [--shapes anthropic openai gemini]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_evalmine.adapters.base import Request  # noqa: E402
from pytest_evalmine.judging.judge import (  # noqa: E402
    SYSTEM_PROMPT,
    judge_request,
    rubric_for,
    task_prompt,
)
from pytest_evalmine.judging.pairs import BASELINE_FIRST, CANDIDATE_FIRST, Pair  # noqa: E402
from pytest_evalmine.run.dispatch import Dispatcher  # noqa: E402
from pytest_evalmine.run.prices import load_prices  # noqa: E402
from pytest_evalmine.run.store import Store  # noqa: E402
from pytest_evalmine.suite.loader import Suite, load_suite  # noqa: E402
from tests.dispatchers import loopback_registry  # noqa: E402
from tests.prompt_cache_server import prompt_cache_server  # noqa: E402

ENV = "EVALMINE_BENCH_CACHE_KEY"
JUDGES = {
    "anthropic": "anthropic/claude-sonnet-4-6",
    "openai": "openai/gpt-5-mini",
    "gemini": "google/gemini-2.5-flash",
}
BASE, CAND = "fake/base", "fake/cand"
# Prompt template 2, as judging/judge.py sent it before issue 23 (system: SYSTEM_PROMPT).
TEMPLATE_2 = """\
## Task given to the assistant
{task_prompt}

## Rubric
{rubric}

## Answer 1
{answer_1}

## Answer 2
{answer_2}

## Your verdict
Reply with exactly one JSON object: {{"winner": "1" | "2" | "tie", "reason": "<one sentence>"}}.
Say "tie" when neither answer is clearly better."""
RUBRIC_SENTENCE = (
    "Prefer the answer that names the customer's problem, its cause and the next step, "
    "in the customer's language, without promising what support cannot do. "
)


def make_suite(directory: Path, cases: int, rubric_chars: int) -> Suite:
    repeats = max(1, rubric_chars // len(RUBRIC_SENTENCE))
    rubric = (RUBRIC_SENTENCE * repeats).strip()
    lines = [
        "version: 1",
        "suite: bench",
        f"models: [{BASE}, {CAND}]",
        "judge:",
        "  model: fake/judge",
        f'  rubric: "{rubric}"',
        "tasks:",
        "  - id: reply",
        "    kind: rewrite",
        '    prompt: "Reply to this customer message, politely and briefly: {{ msg }}"',
        "    cases:",
        *(
            f'      - {{id: c{i}, vars: {{msg: "ticket {i}: my parcel {i} is late again"}}}}'
            for i in range(cases)
        ),
    ]
    path = directory / "bench.eval.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_suite(path)


def answers(pair: Pair, chars: int) -> dict[str, str]:
    def text(model: str) -> str:
        body = f"{model} on {pair.case}: we are sorry about the delay, here is what happens next. "
        return (body * (chars // len(body) + 1))[:chars]

    return {pair.baseline: text(pair.baseline), pair.candidate: text(pair.candidate)}


def requests_for(suite: Suite, judge: str, way: str, answer_chars: int) -> list[Request]:
    pairs = [Pair("bench", "reply", case.id, BASE, CAND) for case in suite.tasks[0].cases]
    built = []
    for pair in pairs:
        texts = answers(pair, answer_chars)
        for order in (BASELINE_FIRST, CANDIDATE_FIRST):
            request = judge_request(judge, suite, pair, order, texts)
            if way == "before":
                first, second = (BASE, CAND) if order == BASELINE_FIRST else (CAND, BASE)
                request = Request(
                    model=judge,
                    prompt=TEMPLATE_2.format(
                        task_prompt=task_prompt(suite, pair.task, pair.case),
                        rubric=rubric_for(suite, pair.task),
                        answer_1=texts[first],
                        answer_2=texts[second],
                    ),
                    system=SYSTEM_PROMPT,
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    schema=request.schema,
                    context=request.context,
                )
            built.append(request)
    return built


def run_way(scratch: Path, shape: str, way: str, requests: list[Request]) -> dict[str, float]:
    with prompt_cache_server(shape, enabled=way != "no cache") as cache:
        dispatcher = Dispatcher(
            registry=loopback_registry(cache.url, ENV),
            store=Store(scratch / f"{shape}-{way}.sqlite"),
            prices=load_prices(),
            run_token="bench",
            cap_usd=1_000.0,
            retries=0,
        )
        started = time.perf_counter()
        planned = dispatcher.plan(requests)
        outcomes = dispatcher.run_each(planned)
        wall = time.perf_counter() - started
    usages = [o.response.usage for o in outcomes if o.response is not None]
    assert len(usages) == len(requests), "every call answered"
    return {
        "cost": sum(o.cost_usd for o in outcomes),
        "worst": sum(p.max_cost_usd for p in planned),
        "reads": sum(1 for u in usages if u.cached_input_tokens),
        "read_tokens": sum(u.cached_input_tokens for u in usages),
        "write_tokens": sum(u.cache_write_tokens for u in usages),
        "input_tokens": sum(u.input_tokens for u in usages),
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rubric-chars", type=int, nargs="+", default=[300, 6000])
    parser.add_argument("--answer-chars", type=int, default=1200)
    parser.add_argument("--shapes", nargs="+", default=list(JUDGES), choices=list(JUDGES))
    args = parser.parse_args()
    os.environ[ENV] = "bench-key-not-a-secret"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)
    print(
        f"{args.cases} pairs, {2 * args.cases} judge calls, answers {args.answer_chars} chars; "
        "cost per 1,000 judged pairs (USD)"
    )
    print(
        "| judge (list price) | rubric chars | way | cost / 1,000 pairs | vs no cache | "
        "calls reading the cache | cached tokens | written tokens | worst case |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for rubric_chars in args.rubric_chars:
            folder = Path(tmp) / f"suite-{rubric_chars}"
            folder.mkdir()
            suite = make_suite(folder, args.cases, rubric_chars)
            for shape in args.shapes:
                judge = JUDGES[shape]
                plain = None
                for way in ("no cache", "before", "after"):
                    built = requests_for(suite, judge, way, args.answer_chars)
                    scratch = Path(tmp) / f"{shape}-{rubric_chars}"
                    scratch.mkdir(exist_ok=True)
                    row = run_way(scratch, shape, way, built)
                    per_1000 = row["cost"] * 1000 / args.cases
                    plain = per_1000 if plain is None else plain
                    print(
                        f"| {judge} | {rubric_chars:,} | {way} | ${per_1000:.4f} | "
                        f"{per_1000 / plain:.0%} | {row['reads']:,} of {len(built):,} | "
                        f"{row['read_tokens']:,} | {row['write_tokens']:,} | "
                        f"${row['worst'] * 1000 / args.cases:.4f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
