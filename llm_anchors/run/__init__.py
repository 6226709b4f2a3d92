"""A dataset explained as a resumable run: its inputs, its results file, the run, its report.

The run's API: ``from llm_anchors.run import ResultsFile, explain_resumable``.
"""

from .._exceptions import SetAsideWarning
from .estimate import Forecast, estimate
from .inputs import read_inputs
from .report import write_report
from .results import ResultsFile, input_hash, read_results
from .resumable import RunReport, explain_resumable, run_config

__all__ = [
    "Forecast",
    "ResultsFile",
    "RunReport",
    "SetAsideWarning",
    "estimate",
    "explain_resumable",
    "input_hash",
    "read_inputs",
    "read_results",
    "run_config",
    "write_report",
]
