"""``python -m tests.bench [--quick] [--profile] [--out bench-results]`` (``make bench``)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from tests.bench import (
    channels,
    executor,
    floors,
    media,
    memory,
    modes,
    procs,
    report,
    scheduler,
    web,
)
from tests.bench.markdown import render
from tests.bench.run import Plan, bench_profile, bench_stack


def _say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # unwinds through every finally: stacks and the fake are stopped


def run(plan: Plan, with_profile: bool, baseline: dict[str, Any] | None = None) -> dict[str, Any]:
    started = time.monotonic()
    results: dict[str, Any] = {
        "schema": 1,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": report.machine(),
        "git": report.git_state(),
        "config": {
            "quick": plan.quick,
            "sequential_turns": plan.sequential_turns,
            "growth_turns": plan.growth_turns,
            "turns_per_session": plan.turns_per_session,
            "levels": [{"concurrent_sessions": c, "sessions": s} for c, s in plan.levels],
            "replicas": list(plan.replicas),
            "stack_args": ["--processes", "--scale", "agent=N"],  # the agent=N stacks, as before
            "modes": {mode: list(args) for mode, args in modes.MODES.items()},
            "warm_starts": plan.warm_starts,
            "model": "fake (tests.fakes.llm, tool_then_text, OpenAI wire format, own process)",
            "turn": "POST /v1/chat/completions, non-streaming, one tool call then text",
        },
        "stacks": {},
    }
    _say("starting the fake model")
    fake = procs.start_fake_model("tool_then_text")
    try:
        model = floors.model_floor(fake.openai_base_url, plan.model_pairs)
        results["model_floor_ms"] = model
        _say(f"fake model, two calls per turn: p50 {model['p50']:.2f} ms")
        for replicas in plan.replicas:
            stack = bench_stack(
                plan, fake, replicas, model["p50"], _say, with_floors=not results.get("floors")
            )
            if "floors" in stack:
                results["floors"] = stack.pop("floors")
            results["stacks"][f"agent={replicas}"] = stack
        results["modes"] = modes.bench_modes(plan, fake, model["p50"], _say)
        if baseline:
            results["modes_baseline"] = baseline
        results["executor"] = executor.bench_executors(plan, fake, _say)
        results["channels"] = channels.bench_channels(plan, fake, _say)
        results["memory"] = memory.bench_memory(_say)
        results["scheduler"] = scheduler.bench_scheduler(_say)
        results["media"] = media.bench_media(_say)
        results["web"] = web.bench_web(plan, fake, _say)
        if with_profile:
            results["profile"] = bench_profile(plan, fake, _say)
    finally:
        fake.stop()
    results["bench_wall_s"] = round(time.monotonic() - started, 1)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench",
        description="Benchmark the embedded stack with an instant fake model (issue 3).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer turns and tool calls: a few minutes at most"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also run a traced stack: where a turn's time goes"
    )
    parser.add_argument("--out", default="bench-results", help="output dir (default: %(default)s)")
    parser.add_argument(
        "--baseline",
        metavar="JSON",
        help="an earlier latest.json to compare the embedded modes with "
        "(default: OUT/latest.json as it was before this run)",
    )
    parser.add_argument(
        "--only",
        choices=("modes", "channels", "memory", "scheduler", "media", "web"),
        help="run one section and put its figures into OUT/latest.json, keeping the other "
        "sections of the earlier run",
    )
    args = parser.parse_args(argv)
    procs.allow_bytecode()
    plan = Plan.short() if args.quick else Plan.full()
    out_dir = Path(args.out)
    signal.signal(signal.SIGTERM, _on_sigterm)
    if args.only:
        return _only(args.only, out_dir)
    baseline = modes.baseline(Path(args.baseline) if args.baseline else out_dir / "latest.json")
    if args.baseline and baseline is None:
        parser.error(f"--baseline {args.baseline}: not a latest.json with figures to compare")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    try:
        results = run(plan, args.profile, baseline)
    except KeyboardInterrupt:
        _say("interrupted; everything it started is stopped, no results written")
        return 130
    json_path, md_path = report.write(results, out_dir)
    print("\n".join(render(results)))
    _say(f"wrote {json_path} and {md_path} in {results['bench_wall_s']:.0f}s")
    return 0


def _channels(say: Callable[[str], None]) -> dict[str, Any]:
    """The channels section on its own: it needs the fake model the full run starts."""
    fake = procs.start_fake_model("tool_then_text")
    try:
        return channels.bench_channels(Plan.full(), fake, say)
    finally:
        fake.stop()


def _web(say: Callable[[str], None]) -> dict[str, Any]:
    """The web pages on their own (the fake model the stack needs)."""
    fake = procs.start_fake_model("tool_then_text")
    try:
        return web.bench_web(Plan.full(), fake, say)
    finally:
        fake.stop()


def _modes(say: Callable[[str], None]) -> dict[str, Any]:
    """The embedded modes on their own (issue 25's figures: ready, PSS, turn, CPU per turn)."""
    fake = procs.start_fake_model("tool_then_text")
    try:
        plan = Plan.full()
        model = floors.model_floor(fake.openai_base_url, plan.model_pairs)
        return modes.bench_modes(plan, fake, model["p50"], say)
    finally:
        fake.stop()


def _modes_context(m: dict[str, Any]) -> dict[str, Any]:
    """What the modes' markdown reads besides their figures."""
    plan = Plan.full()
    levels = [{"concurrent_sessions": c, "sessions": s} for c, s in plan.levels]
    config = {"levels": levels, "warm_starts": plan.warm_starts}
    return {"modes": m, "git": report.git_state(), "config": config}


# The sections --only reruns: (bench, markdown).
Bench = Callable[[Callable[[str], None]], dict[str, Any]]
SECTIONS: dict[str, tuple[Bench, Callable[[dict[str, Any]], list[str]]]] = {
    "modes": (_modes, lambda m: modes.markdown(_modes_context(m))),
    "channels": (_channels, channels.markdown),
    "memory": (memory.bench_memory, memory.markdown),
    "scheduler": (scheduler.bench_scheduler, scheduler.markdown),
    "media": (media.bench_media, media.markdown),
    "web": (_web, web.markdown),
}


def _only(section: str, out_dir: Path) -> int:
    """One section into the earlier run's results (``--only``)."""
    earlier = out_dir / "latest.json"
    if section == "modes" and not earlier.is_file():
        return _modes_alone(out_dir)
    if section == "web" and not earlier.is_file():
        return _section_alone(section, out_dir)
    if not earlier.is_file():
        _say(f"--only needs an earlier full run's {earlier}; run `make bench` first")
        return 2
    results = json.loads(earlier.read_text())
    bench, markdown = SECTIONS[section]
    try:
        results[section] = bench(_say)
    except KeyboardInterrupt:
        _say("interrupted; everything it started is stopped, no results written")
        return 130
    results[f"{section}_run_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    json_path, md_path = report.write(results, out_dir)
    print("\n".join(markdown(results[section])))
    _say(f"wrote {section} into {json_path} and {md_path}")
    return 0


def _section_alone(section: str, out_dir: Path) -> int:
    """``--only <section>`` without an earlier full run: OUT/<section>.json, the table printed."""
    bench, markdown = SECTIONS[section]
    try:
        figures = bench(_say)
    except KeyboardInterrupt:
        _say("interrupted; everything it started is stopped, no results written")
        return 130
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{section}.json"
    run_at = datetime.now(UTC).isoformat(timespec="seconds")
    path.write_text(json.dumps({"run_at": run_at, "git": report.git_state(), section: figures}))
    print("\n".join(markdown(figures)))
    _say(f"wrote {path}")
    return 0


def _modes_alone(out_dir: Path) -> int:
    """``--only modes`` without an earlier full run: OUT/modes.json and the table printed."""
    try:
        figures = _modes(_say)
    except KeyboardInterrupt:
        _say("interrupted; everything it started is stopped, no results written")
        return 130
    context = _modes_context(figures)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "modes.json"
    run_at = datetime.now(UTC).isoformat(timespec="seconds")
    path.write_text(json.dumps({"run_at": run_at, "git": context["git"], "modes": figures}))
    print("\n".join(modes.markdown(context)))
    _say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
