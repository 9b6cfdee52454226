"""Longer fuzz runs of the input parsers than CI's fixed-seed 2,300 per parser, with a failure table.

Uses the strategies and the oracle of ``tests/fuzz`` (mutated fixtures,
generated plausible-but-wrong documents, raw bytes, text for the cpuset and
size helpers) but, unlike the tests, does not stop at the first failure:
every input is run, failures are grouped by exception type and the line
that raised it, and the shortest input of each group is printed (and saved
with ``--save DIR``). A second table times the refusal of the hostile
documents of ``tests/fuzz/test_fuzz_limits.py`` (information only).

    .venv/bin/python bench/fuzz_long.py                      # 10,000 inputs per parser and strategy
    .venv/bin/python bench/fuzz_long.py --examples 200000 --seed 7 --parsers hwloc capabilities
    .venv/bin/python bench/fuzz_long.py --strategies mutated --save /tmp/fuzz-failures

Without ``--seed`` a random seed is drawn and printed, so a run that finds
something can be repeated. Exit status 1 when any input failed. 6,000 inputs
per parser and strategy (90,000 in all) took 6 minutes on this 2-core machine,
so the default 10,000 takes about 10.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.fuzz.mutate import FAMILIES, mutated
from tests.fuzz.oracle import PARSERS, outcome
from tests.fuzz.test_fuzz_limits import CASES
from tests.fuzz.test_fuzz_text import TEXT
from tests.fuzz.test_fuzz_xml import GENERATED, RAW
from vnuma.errors import InvalidInputError

XML_FAMILY = {
    "capabilities": "capabilities",
    "nodedev": "nodedev",
    "nodedev-file": "nodedev",
    "hwloc": "hwloc",
    "nvidia-smi": "nvidia-smi",
}


def strategy_for(parser: str, kind: str) -> st.SearchStrategy[bytes | str] | None:
    """The inputs of one strategy kind for one parser; None when the pair does not apply."""
    if parser in XML_FAMILY:
        return {
            "mutated": mutated(FAMILIES[XML_FAMILY[parser]]),
            "generated": GENERATED[parser],
            "raw": RAW,
        }.get(kind)
    return TEXT[parser] if kind == "text" else None


@dataclass
class Tally:
    """What one parser did with one strategy's inputs."""

    inputs: int = 0
    ok: int = 0
    refused: int = 0
    failures: dict[str, list[bytes | str]] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(len(v) for v in self.failures.values())


def _signature(err: BaseException) -> str:
    frame = traceback.extract_tb(err.__traceback__)[-1]
    return f"{type(err).__name__} at {Path(frame.filename).name}:{frame.lineno}"


def run(parser: str, inputs: st.SearchStrategy[bytes | str], examples: int, run_seed: int) -> Tally:
    """Run ``examples`` inputs through ``parser``, recording every failure instead of stopping."""
    tally = Tally()

    @seed(run_seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(inputs)
    def body(document: bytes | str) -> None:
        tally.inputs += 1
        try:
            result = outcome(parser, document)
        except Exception as err:  # the point is to catch everything the oracle did not expect
            signature = _signature(err)
            tally.failures.setdefault(signature, []).append(document)
            tally.messages.setdefault(signature, str(err)[:160])
            return
        if result == "ok":
            tally.ok += 1
        else:
            tally.refused += 1

    start = time.perf_counter()
    body()
    tally.seconds = time.perf_counter() - start
    return tally


def _print_table(rows: list[tuple[str, str, Tally]]) -> None:
    head = (
        f"{'parser':<14}{'strategy':<11}{'inputs':>9}{'ok':>9}{'refused':>9}{'failed':>8}{'kinds':>7}{'s':>8}"
    )
    print(head)
    print("-" * len(head))
    for parser, kind, t in rows:
        print(
            f"{parser:<14}{kind:<11}{t.inputs:>9}{t.ok:>9}{t.refused:>9}{t.failed:>8}"
            f"{len(t.failures):>7}{t.seconds:>8.1f}"
        )


def _report_failures(rows: list[tuple[str, str, Tally]], save: Path | None) -> None:
    for parser, kind, t in rows:
        for n, (signature, docs) in enumerate(sorted(t.failures.items())):
            shortest = min(docs, key=len)
            print(f"\n{parser}/{kind}: {len(docs)} x {signature}: {t.messages[signature]!r}")
            print(f"  shortest input: {shortest[:300]!r}")
            if save is not None:
                save.mkdir(parents=True, exist_ok=True)
                data = shortest if isinstance(shortest, bytes) else shortest.encode("utf-8", "surrogatepass")
                (save / f"{parser}-{kind}-{n}.bin").write_bytes(data)


def _time_limits() -> None:
    title = "hostile document (tests/fuzz/test_fuzz_limits.py)"
    print(f"\n{title:<52}{'parser':<14}{'MB':>6}{'ms to refuse':>14}")
    for name in sorted(CASES):
        parser, build, _ = CASES[name]
        document = build()
        call: Callable[[bytes | str], object] = PARSERS[parser][0]
        start = time.perf_counter()
        try:
            call(document)
            verdict = "ACCEPTED"
        except InvalidInputError:
            verdict = f"{(time.perf_counter() - start) * 1000:.1f}"
        print(f"{name:<52}{parser:<14}{len(document) / 1e6:>6.1f}{verdict:>14}")


def main(argv: list[str] | None = None) -> int:
    """Parse options, fuzz, print the tables; 1 when anything failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=10_000, help="inputs per parser and strategy")
    ap.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: random, printed)")
    ap.add_argument("--parsers", nargs="+", choices=sorted(PARSERS), default=sorted(PARSERS))
    ap.add_argument(
        "--strategies",
        nargs="+",
        choices=["mutated", "generated", "raw", "text"],
        default=["mutated", "generated", "raw", "text"],
    )
    ap.add_argument(
        "--save", type=Path, default=None, help="write the shortest failing input of each kind here"
    )
    ap.add_argument("--no-limits", action="store_true", help="skip the hostile-document timing table")
    args = ap.parse_args(argv)
    run_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {run_seed}, {args.examples} inputs per parser and strategy\n")
    rows = []
    for parser in args.parsers:
        for kind in args.strategies:
            inputs = strategy_for(parser, kind)
            if inputs is not None:
                rows.append((parser, kind, run(parser, inputs, args.examples, run_seed)))
    _print_table(rows)
    _report_failures(rows, args.save)
    if not args.no_limits:
        _time_limits()
    return 1 if any(t.failures for _, _, t in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
