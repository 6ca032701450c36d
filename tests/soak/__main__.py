"""``python -m tests.soak`` (``make soak``): the fault campaign. SOAK_MINUTES (default 10,
a float) sets its length, SOAK_SEED (default: random, printed) its schedule; ``--minutes``
and ``--seed`` override them. Exit 0 only with nothing lost, nothing duplicated and no
process left; the report is ``bench-results/soak.json``."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tests.soak import report
from tests.soak.campaign import Options, run
from tests.soak.chaos import KINDS


class SoakSettings(BaseSettings):
    """The campaign's settings (its own: no service reads them)."""

    model_config = SettingsConfigDict(env_prefix="SOAK_")

    minutes: float = Field(default=10.0, gt=0)
    seed: int | None = None
    cluster: bool = True  # three NATS nodes when switchboard.natscluster exists


def main(argv: list[str] | None = None) -> int:
    settings = SoakSettings()
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=settings.minutes)
    parser.add_argument("--seed", type=int, default=settings.seed)
    parser.add_argument("--keep", action="store_true", help="keep the data dir and logs")
    parser.add_argument(
        "--plan", help="these faults in this order instead of random ones, e.g. kill,nats,postgres"
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"soak: {args.minutes:g} minutes, seed {seed} (SOAK_SEED={seed} repeats the "
          "schedule)", flush=True)  # fmt: skip
    plan = tuple(args.plan.split(",")) if args.plan else None
    if plan and not set(plan) <= set(KINDS):
        parser.error(f"--plan: faults are {', '.join(KINDS)}")
    options = Options(
        minutes=args.minutes, seed=seed, plan=plan, cluster=settings.cluster, keep=args.keep
    )
    result = asyncio.run(run(options))
    path = report.write(result)
    print(report.markdown(result))
    print(f"soak: report in {path}; data dir {result['root']}"
          f"{'' if not result['passed'] or args.keep else ' (removed)'}")  # fmt: skip
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
