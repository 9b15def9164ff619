"""MLE-bench's own grading code for the competitions this project serves, to compare against.

Copied verbatim (function bodies) from github.com/openai/mle-bench at commit
783b15af77404fbaffe7255b0c4a934b46153389 (MIT License, Copyright (c) 2024 OpenAI):
``mlebench/competitions/utils.py`` (``prepare_for_accuracy_metric``,
``one_hot_dfs_to_log_loss_inputs``, ``is_one_hot_encoded``), the ``grade.py`` of
spaceship-titanic, spooky-author-identification and ten MLE-bench lite competitions
(aptos2019, denoising-dirty-documents, detecting-insults, dogs-vs-cats-redux, jigsaw, new-york-city-taxi-fare, nomad2018, plant-pathology-2020,
tabular-playground-series-dec-2021, text-normalization-challenge-english-language; argument checks abridged, logic unchanged),
``Grader.__call__``, ``Grader.rank_score`` / ``is_lower_better`` and
``CompetitionReport.from_dict`` of ``mlebench/grade_helpers.py`` (an InvalidSubmissionError or any other exception makes the
submission invalid, the score is rounded to 5 decimals). Only imports and logging were
adapted. The tests cannot fetch MLE-bench (no network), so its logic lives here.
"""

from .reference import (
    GRADE_FUNCTIONS,
    InvalidSubmissionError,
    competition_report_from_dict,
    mlebench_rank_score,
    mlebench_score,
)

__all__ = ["GRADE_FUNCTIONS", "InvalidSubmissionError", "competition_report_from_dict", "mlebench_rank_score",
           "mlebench_score"]
