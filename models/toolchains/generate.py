"""Generate the toolchain zoo: small .tflite models from today's producers other than
TensorFlow's converter on Keras models, from configs with seeded random weights.

    .venv-toolchains/bin/python models/toolchains/generate.py                   everything
    .venv-toolchains/bin/python models/toolchains/generate.py --family keras_hub
    .venv-toolchains/bin/python models/toolchains/generate.py --only 'llama_*'

Families (one module each, run in its own worker process so that one toolchain's
crash or import side effects cannot touch another's models):

- `litert_torch`: LiteRT Torch on `transformers` configs and its generative layers, PT2E
  int8 -> `litert_torch/<model>_{float32,pt2e_int8}.tflite`
- `ai_edge_quantizer`: AI Edge Quantizer recipes on the LiteRT Torch float models
  -> `ai_edge_quantizer/<model>_<recipe>.tflite`
- `keras_hub`: keras-hub backbones through TFLiteConverter -> `keras_hub/<model>_<flavour>.tflite`
- `flax`: Flax modules through jax2tf and TFLiteConverter -> `flax/<model>_<flavour>.tflite`

Every file is invoked once in TFLite's interpreter before it is kept. `manifest.json`
records per file its producer, the versions of every package that made it, the recipe,
the config, builtin ops, inputs (with the real range calibration and tests draw from),
outputs, size and sha256, and every model a toolchain could not make, with the reason.
Entries of families not regenerated in a run are kept as they were.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # tfl2tosa, read by zoo_inspect
sys.path.insert(0, str(HERE.parent))  # zoo_inspect
sys.path.insert(0, str(HERE))

from toolchain_case import Built, Case  # noqa: E402

MANIFEST_NAME = "manifest.json"
FAMILIES = ("litert_torch", "ai_edge_quantizer", "keras_hub", "flax")
# The packages whose versions each family's files depend on.
FAMILY_PACKAGES = {
    "litert_torch": ("torch", "litert-torch", "litert-converter", "transformers", "torchao"),
    "ai_edge_quantizer": ("ai-edge-quantizer", "ai-edge-litert", "torch", "litert-torch",
                          "transformers"),
    "keras_hub": ("tensorflow-cpu", "keras", "keras-hub"),
    "flax": ("jax", "flax", "tensorflow-cpu"),
}
WORKER_TIMEOUT_SECONDS = 3600


def family_cases(family: str) -> list[Case]:
    module = importlib.import_module(f"{family}_family")
    return module.cases()


def versions(family: str) -> dict[str, str]:
    found = {}
    for package in FAMILY_PACKAGES[family]:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def run_once_in_tflite(data: bytes, ranges: list[tuple[float, float]]) -> None:
    """Invoke the model once on seeded inputs from its ranges; raises what TFLite raises."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter
    interpreter = Interpreter(model_content=data)
    interpreter.allocate_tensors()
    rng = np.random.default_rng(0)
    details = interpreter.get_input_details()
    if len(details) != len(ranges):
        raise ValueError(f"{len(details)} model inputs but {len(ranges)} ranges")
    for detail, (low, high) in zip(details, ranges):
        dtype = np.dtype(detail["dtype"])
        if np.issubdtype(dtype, np.integer) and detail["quantization"][0] == 0:
            value = rng.integers(int(low), int(high), size=detail["shape"])
        elif np.issubdtype(dtype, np.integer):
            scale, zero_point = detail["quantization"]
            info = np.iinfo(dtype)
            value = np.clip(np.round(rng.uniform(low, high, size=detail["shape"]) / scale)
                            + zero_point, info.min, info.max)
        else:
            value = rng.uniform(low, high, size=detail["shape"])
        interpreter.set_tensor(detail["index"], value.astype(dtype))
    interpreter.invoke()


def describe(case: Case, built: Built, family: str) -> dict:
    from zoo_inspect import describe_model
    facts = describe_model(built.data)
    for entry, (low, high) in zip(facts["inputs"], built.ranges):
        entry["range"] = [low, high]
    return {"path": case.path, "family": family, "recipe": built.recipe,
            "versions": versions(family), "config": built.config, **facts,
            "size": len(built.data), "sha256": hashlib.sha256(built.data).hexdigest(),
            **({"notes": built.notes} if built.notes else {})}


def worker(family: str, patterns: list[str], result_path: Path) -> None:
    """Build the family's selected cases; write each model and a JSON result list."""
    results = []
    cases = family_cases(family)
    for case in cases:
        if patterns and not any(fnmatch.fnmatch(Path(case.path).stem, p) for p in patterns):
            continue
        print(f"[{family}] {case.path}", flush=True)
        try:
            built = case.build()
            run_once_in_tflite(built.data, built.ranges)
        except Exception as error:  # a toolchain's failure is a fact for the manifest
            reason = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}" \
                if str(error).strip() else type(error).__name__
            traceback.print_exc()
            results.append({"path": case.path, "family": family, "reason": reason})
            print(f"[{family}] {case.path}: NOT PRODUCED ({reason})", flush=True)
            continue
        target = HERE / case.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(built.data)
        results.append(describe(case, built, family))
        print(f"[{family}] {case.path}: {len(built.data)} bytes", flush=True)
    result_path.write_text(json.dumps({"results": results,
                                       "case_paths": [case.path for case in cases]}))


def load_manifest() -> dict:
    path = HERE / MANIFEST_NAME
    if path.exists():
        return json.loads(path.read_text())
    return {"models": [], "not_produced": []}


def merge(manifest: dict, family: str, worker_result: dict, patterns: list[str]) -> dict:
    """The manifest with the family's regenerated entries replaced, and entries of cases
    the family no longer has dropped."""
    results = worker_result["results"]

    def regenerated(entry: dict) -> bool:
        return entry["family"] == family and (
            entry["path"] not in worker_result["case_paths"] or not patterns
            or any(fnmatch.fnmatch(Path(entry["path"]).stem, p) for p in patterns))

    models = [m for m in manifest["models"] if not regenerated(m)]
    failures = [f for f in manifest["not_produced"] if not regenerated(f)]
    models += [r for r in results if "sha256" in r]
    failures += [r for r in results if "reason" in r]
    kept = {m["path"] for m in models}
    for entry in manifest["models"]:  # a model no longer made must not linger on disk
        stale = HERE / entry["path"]
        if entry["path"] not in kept and stale.exists():
            stale.unlink()
    return {"generator": "models/toolchains/generate.py",
            "paths_relative_to": "models/toolchains",
            "models": sorted(models, key=lambda m: m["path"]),
            "not_produced": sorted(failures, key=lambda f: f["path"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=FAMILIES,
                        help="regenerate only this family (repeatable)")
    parser.add_argument("--only", action="append", default=[],
                        help="fnmatch pattern on file stems, e.g. 'llama_*' (repeatable)")
    parser.add_argument("--worker", choices=FAMILIES, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.only, args.result)
        return 0
    failed_workers = []
    for family in args.family or FAMILIES:
        with tempfile.TemporaryDirectory() as tmp:
            result = Path(tmp) / "result.json"
            command = [sys.executable, __file__, "--worker", family, "--result", str(result),
                       *(f"--only={p}" for p in args.only)]
            completed = subprocess.run(command, timeout=WORKER_TIMEOUT_SECONDS)
            if completed.returncode != 0 or not result.exists():
                failed_workers.append(f"{family} (exit {completed.returncode})")
                continue
            manifest = merge(load_manifest(), family, json.loads(result.read_text()),
                             args.only)
        (HERE / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n")
    if failed_workers:
        print("workers failed: " + ", ".join(failed_workers), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
