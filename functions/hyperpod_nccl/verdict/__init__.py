"""The verdict: a diagnosis's findings folded into root causes (pure, beside the checks).

`build_verdict(findings, inventory)` assigns every FAIL/WARN finding to exactly one root cause:
`kinds.py` says what each finding is evidence of and holds the one priority table, `rules.py`
which cause explains which symptom, `fold.py` applies them; the models are in `models/verdict.py`.
"""

from hyperpod_nccl.models.verdict import ExplainedSymptom, RootCause, Verdict
from hyperpod_nccl.verdict.fold import build_verdict

__all__ = ["ExplainedSymptom", "RootCause", "Verdict", "build_verdict"]
