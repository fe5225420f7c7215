#!/usr/bin/env python3
"""Writes example.csv: a synthetic request trace in the Splitwise / Azure column convention
(arrived_at_s, prompt_tokens, output_tokens) that moesim's `arrival: {process: trace}` replays.

200 requests, Poisson arrivals at 10 requests/s, prompt lengths log-normal (median ~450 tokens)
clipped to [100, 2000], output lengths log-normal (median ~120) clipped to [20, 400].
Standard library only and seeded, so running it again reproduces the file byte for byte:

    python3 make_example_trace.py            # writes example.csv next to this script
    python3 make_example_trace.py -o out.csv
"""
import argparse
import math
import pathlib
import random

SEED = 20240611
REQUESTS = 200
RATE_PER_S = 10.0


def clipped_lognormal(rng, median, sigma, lo, hi):
    return max(lo, min(hi, int(round(rng.lognormvariate(math.log(median), sigma)))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(pathlib.Path(__file__).with_name("example.csv")))
    args = parser.parse_args()
    rng = random.Random(SEED)
    t = 0.0
    lines = ["arrived_at_s,prompt_tokens,output_tokens"]
    for _ in range(REQUESTS):
        t += rng.expovariate(RATE_PER_S)
        prompt = clipped_lognormal(rng, 450, 0.7, 100, 2000)
        output = clipped_lognormal(rng, 120, 0.6, 20, 400)
        lines.append(f"{t:.6f},{prompt},{output}")
    pathlib.Path(args.output).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
