"""What `validate` reports: per output, and per model."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np


@dataclass
class OutputComparison:
    name: str
    dtype: str
    shape: list[int]
    exact: bool
    within_tolerance: bool
    max_abs_error: float
    max_rel_error: float
    max_ulp: int | None = None        # float outputs
    max_lsb: int | None = None        # integer outputs
    mismatched_elements: int = 0
    tolerance: str = ""
    # Largest error over the runs judged anchored (see AnchoredRun); None when
    # no run needed anchoring. The fields above are the un-anchored errors.
    anchored_max_abs_error: float | None = None


@dataclass
class ValidationReport:
    model: str
    backend: str = ""
    resolver: str = ""
    kernels: str = ""     # the tfl2tosa.kernels the judged conversion reproduces
    runs: int = 0
    outputs: list[OutputComparison] = field(default_factory=list)
    first_divergence: str | None = None
    fallback_ops: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Runs that passed only anchored (validate re-ran our reference model with
    # TFLite's values at emulated hybrid ops' inputs), how many such inputs were
    # anchored and the largest difference between ours and TFLite's there, in
    # ulps of that tensor's largest magnitude.
    anchored_runs: int = 0
    anchored_inputs: int = 0
    anchored_max_ulp: int | None = None
    # Filled with keep_details (for the HTML page); never part of to_dict.
    details: ValidationDetails | None = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return not self.errors and all(o.within_tolerance for o in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}
        data["outputs"] = [asdict(o) for o in self.outputs]
        data["passed"] = self.passed
        return data


@dataclass
class ValidationDetails:
    """What a picture of a validation needs beyond the report."""

    conversion: Any = None                  # the ConversionReport
    # TFLite tensor name -> largest |ours - TFLite| over the runs (integers in
    # stored units), for every tensor both graphs have.
    tensor_errors: dict[str, float] = field(default_factory=dict)
    # Output name -> |ours - TFLite| of every element of every run.
    output_errors: dict[str, np.ndarray] = field(default_factory=dict)
