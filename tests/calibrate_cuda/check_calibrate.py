#!/usr/bin/env python3
"""Smoke test of moesim-calibrate (Meson suite 'calibrate').

usage: check_calibrate.py MOESIM_CALIBRATE OUT_JSON

CI has nvcc and the CUDA libraries but no GPU, so the program must refuse clearly there: exit
status 3 and "no CUDA device" on stderr. Where a GPU exists it must instead measure a tiny GEMM
sweep and write a measurement file in the "moesim-measurements/1" format that the simulator's
`Measurements::from_json` reads. Either outcome passes; anything else fails with the reason.
"""
import json
import os
import shutil
import subprocess
import sys

EXIT_USAGE = 2
EXIT_NO_DEVICE = 3


def run(binary, *args):
    """Runs the program and returns (exit status, stdout, stderr)."""
    env = dict(os.environ)
    # Under AddressSanitizer (make sanitize) the CUDA driver cannot map its memory unless the
    # shadow gap is left unprotected; without this a GPU machine would report no device.
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "protect_shadow_gap=0"]))
    proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=540, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def gpu_listed():
    """True when nvidia-smi exists and lists at least one GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "GPU" in proc.stdout


def check_measurements(doc):
    """Returns a list of problems with a measurement document (empty when it is valid)."""
    problems = []
    for key, kind in [("format", str), ("source", str), ("device", str), ("environment", dict),
                      ("gemm", list), ("memcpy", list), ("collectives", list), ("skipped", list)]:
        if not isinstance(doc.get(key), kind):
            problems.append(f"key '{key}' missing or not a {kind.__name__}")
    if problems:
        return problems
    if doc["format"] != "moesim-measurements/1":
        problems.append(f"format is {doc['format']!r}")
    if doc["source"] != "moesim-calibrate":
        problems.append(f"source is {doc['source']!r}")
    env = doc["environment"]
    for key in ["driver_version", "cuda_runtime_version", "cublas_version", "nccl_version", "devices"]:
        if key not in env:
            problems.append(f"environment.{key} missing")
    for dev in env.get("devices", []):
        for key in ["index", "name", "sm_count", "memory_bytes", "compute_capability", "sm_clock_mhz",
                    "mem_clock_mhz"]:
            if key not in dev:
                problems.append(f"environment.devices[].{key} missing")
    if not doc["gemm"]:
        problems.append("no GEMM samples")
    for g in doc["gemm"]:
        if g.get("dtype") not in ("fp32", "fp16", "bf16", "fp8"):
            problems.append(f"bad dtype in {g}")
        for key in ["m", "n", "k"]:
            if not isinstance(g.get(key), int) or g[key] <= 0:
                problems.append(f"bad {key} in {g}")
        if not isinstance(g.get("time_us"), (int, float)) or g["time_us"] <= 0:
            problems.append(f"bad time_us in {g}")
    return problems


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary, out = sys.argv[1], sys.argv[2]
    failures = []

    # Independent of any GPU: --help works and a bad option is a usage error.
    status, stdout, _ = run(binary, "--help")
    if status != 0 or "usage: moesim-calibrate" not in stdout:
        failures.append(f"--help: exit {status}, stdout {stdout[:200]!r}")
    status, _, stderr = run(binary, "gemm", "--no-such-option")
    if status != EXIT_USAGE or "unknown option" not in stderr:
        failures.append(f"bad option: exit {status} (want {EXIT_USAGE}), stderr {stderr.strip()!r}")

    if os.path.exists(out):
        os.remove(out)
    status, stdout, stderr = run(binary, "gemm", "--out", out, "--dtypes", "fp16", "--nk", "1024:1024",
                                 "--m-sweep", "1,64", "--repeats", "3", "--warmup", "1")
    if status == EXIT_NO_DEVICE:
        if "no CUDA device" not in stderr:
            failures.append(f"exit 3 without 'no CUDA device' on stderr: {stderr.strip()!r}")
        elif gpu_listed():
            failures.append("nvidia-smi lists a GPU but moesim-calibrate found no CUDA device: "
                            + stderr.strip())
        else:
            print(f"no GPU: moesim-calibrate refused as required: {stderr.strip()}")
    elif status == 0:
        try:
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            failures.append(f"exit 0 but {out} is not readable JSON: {e}")
        else:
            failures += [f"{out}: {p}" for p in check_measurements(doc)]
            print(f"GPU {doc.get('device')!r}: {len(doc.get('gemm', []))} GEMM samples written to {out}")
    else:
        failures.append(f"gemm run: exit {status} (want 0 with a GPU, 3 without); stderr: {stderr.strip()}")

    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
