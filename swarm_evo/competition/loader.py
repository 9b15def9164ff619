"""``load_competition``: build a ``Competition`` from a prepared MLE-bench folder.

Built-in ids (``BUILTIN_COMPETITIONS``) take their config from code. Any other id needs
``<data_dir>/<id>/config.yaml`` in MLE-bench's format (copy ``mlebench/competitions/<id>/
config.yaml`` there for data prepared by ``mlebench prepare``)::

    id: spaceship-titanic
    name: Spaceship Titanic
    competition_type: simple
    awards_medals: false
    dataset:
      answers: spaceship-titanic/prepared/private/test.csv            # relative to data_dir
      sample_submission: spaceship-titanic/prepared/public/sample_submission.csv
    grader:
      name: accuracy

Other MLE-bench keys (prizes, description, grader.grade_fn, preparer, prepare_fn, ...) are
accepted and ignored. swarm-evo adds two optional keys: ``dataset.id_column`` (default: the
sample submission's first column) and ``dataset.target_columns`` (a name or a list; default:
the sample submission's other columns). Columns that are neither (detecting-insults'
``Date``) are ignored by graders that ignore extra columns, as MLE-bench's do.

Before returning, ``load_competition`` checks the folder (``validate.py``): the files the
competition needs exist, the sample submission has the id column, the private answers have
exactly its ids. Every error is a one-line ``CompetitionError`` naming the file or field and
the fix.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .builtins import BUILTIN_COMPETITIONS
from .errors import CompetitionError
from .graders import get_grader
from .model import Competition
from .validate import (
    check_answer_ids,
    check_files,
    check_id_column,
    one_line,
    read_header,
)


def embedded_description(competition_id: str) -> str:
    """The short description shipped in ``descriptions/<id>.md`` ("" if none)."""
    try:
        res = resources.files(__package__).joinpath("descriptions", f"{competition_id}.md")
        return res.read_text(encoding="utf-8") if res.is_file() else ""
    except (FileNotFoundError, ModuleNotFoundError):
        return ""


def prepare_hint(competition_id: str, data_dir: Path) -> str:
    """The command that creates ``<data_dir>/<id>`` (for error messages)."""
    spec = BUILTIN_COMPETITIONS.get(competition_id)
    if spec is None:
        return (
            f"prepare it with MLE-bench (`mlebench prepare -c {competition_id}`) and pass its "
            f"data folder as --data-dir, with config.yaml copied to {data_dir}/{competition_id}/"
        )
    raw = " --raw-dir RAW_DIR" if spec.needs_raw_dir else ""
    return f"run `swarm-evo prepare {competition_id}{raw} --data-dir {data_dir}`"


def _read_sample_header(path: Path, fix: str) -> list[str]:
    columns = read_header(path, "sample submission")
    if len(columns) < 2:
        raise CompetitionError(one_line(
            f"{path}: sample submission needs an id column and at least one target column, "
            f"columns found: {columns}: {fix}"
        ))
    return columns


def _read_config(path: Path, competition_id: str) -> dict[str, Any]:
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CompetitionError(one_line(f"{path}: invalid YAML ({exc})")) from exc
    if not isinstance(config, dict):
        raise CompetitionError(f"{path}: expected a mapping of MLE-bench config fields")

    def need(*keys: str) -> Any:
        node: Any = config
        for i, key in enumerate(keys):
            if not isinstance(node, dict) or node.get(key) in (None, ""):
                field = ".".join(keys[: i + 1])
                raise CompetitionError(f"{path}: missing required field '{field}'")
            node = node[key]
        return node

    def need_text(*keys: str) -> str:
        value = need(*keys)
        if not isinstance(value, str):
            raise CompetitionError(
                one_line(f"{path}: field '{'.'.join(keys)}' must be a string, got {value!r}")
            )
        return value

    cfg_id = str(need("id"))
    if cfg_id != competition_id:
        raise CompetitionError(
            f"{path}: field 'id' is {cfg_id!r} but the folder is {competition_id!r}; "
            f"they must match"
        )
    awards = config.get("awards_medals", False)
    if not isinstance(awards, bool):
        raise CompetitionError(f"{path}: field 'awards_medals' must be true or false, got {awards!r}")
    return {
        "name": str(config.get("name") or competition_id),
        "competition_type": str(config.get("competition_type") or "simple"),
        "awards_medals": awards,
        "answers": need_text("dataset", "answers"),
        "sample_submission": need_text("dataset", "sample_submission"),
        "grader_name": need_text("grader", "name"),
        "grade_fn": str((config.get("grader") or {}).get("grade_fn") or ""),
        "id_column": need_text("dataset", "id_column") if config["dataset"].get("id_column") is not None else None,
        "target_columns": _target_columns(path, config["dataset"].get("target_columns")),
    }


def _target_columns(path: Path, value: Any) -> list[str] | None:
    """``dataset.target_columns``: None (absent) or a non-empty list of column names."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(c, str) and c for c in value):
        raise CompetitionError(one_line(
            f"{path}: field 'dataset.target_columns' must be a column name or a list of them, got {value!r}"
        ))
    return value


MLEBENCH_COLUMNS: dict[str, tuple[str, list[str]]] = {
    # id column, target columns, from the competition's mlebench grade.py
    # (prepare_for_auroc_metric(..., id_col="Comment", target_col="Insult")); its sample
    # submission starts with the target, so "the first column" would be wrong.
    "detecting-insults-in-social-commentary": ("Comment", ["Insult"]),
}
"""MLE-bench competitions whose id column is not the sample submission's first: the defaults
when their ``config.yaml`` declares no ``dataset.id_column`` / ``dataset.target_columns``."""

MLEBENCH_REPO_ENV = "MLEBENCH_REPO"
"""Environment variable naming an mle-bench checkout (the default of ``mlebench_repo``)."""


def mlebench_competition_dir(mlebench_repo: Path | str | None, competition_id: str) -> Path | None:
    """``<repo>/mlebench/competitions/<id>`` of an mle-bench checkout (``mlebench_repo``, else
    ``$MLEBENCH_REPO``), or None when no checkout is named.

    Raises:
        CompetitionError: the named directory is not an mle-bench checkout (no
            ``mlebench/competitions/`` in it); the message names it and the variable or flag.
    """
    repo = mlebench_repo or os.environ.get(MLEBENCH_REPO_ENV) or None
    if repo is None:
        return None
    root = Path(repo).expanduser()
    if not (root / "mlebench" / "competitions").is_dir():
        raise CompetitionError(
            f"mle-bench checkout {root} (--mlebench-repo, config mlebench_repo or ${MLEBENCH_REPO_ENV}) has no "
            "mlebench/competitions/: give the root of a clone of github.com/openai/mle-bench"
        )
    return root / "mlebench" / "competitions" / competition_id


def load_competition(competition_id: str, data_dir: Path, mlebench_repo: Path | str | None = None, *,
                     private_root: Path | None = None) -> Competition:
    """Load competition ``competition_id`` prepared under ``data_dir``.

    Args:
        competition_id: a built-in id or the name of a folder in ``data_dir`` that has
            an MLE-bench ``config.yaml``.
        data_dir: the folder holding ``<id>/prepared/...`` (e.g. ``data`` or
            ``~/.cache/mle-bench/data``).
        mlebench_repo: an mle-bench checkout (default ``$MLEBENCH_REPO``): what ``data_dir/<id>/``
            lacks of ``config.yaml``, ``leaderboard.csv`` and the description is read in place
            from its ``mlebench/competitions/<id>/`` (so ``mlebench prepare`` data runs with no
            file copied). A leaderboard that is still a Git LFS pointer is reported when graded.
        private_root: the folder holding ``<id>/prepared/private/`` when it is not ``data_dir``
            (a store's data cache, swarm_evo/store/data.py, fetches the answers only to grade):
            the private files are then neither required nor checked here.

    The id column is the built-in's ``id_column``, the config's ``dataset.id_column`` or else
    the sample submission's first column; the target columns are the config's
    ``dataset.target_columns`` or else the sample submission's other columns, in file order. The description is ``prepared/public/description.md`` (""
    if absent; the embedded description for built-ins).

    Raises:
        CompetitionError: one line naming the file or field at fault and the fix: unknown id,
            missing or invalid config.yaml (fields, types, unknown ``grader.name``), a missing
            file or a missing/empty folder (built-ins: ``BuiltinSpec.public_files``,
            ``public_folders`` and ``private_files``; generic: the config's sample submission
            and answers), a sample submission without the id
            column, or private answers whose ids differ from the sample submission's (the
            checks of ``validate.py``; only the id columns are read).
    """
    data_dir = Path(data_dir).expanduser()
    comp_dir = data_dir / competition_id
    spec = BUILTIN_COMPETITIONS.get(competition_id)
    upstream = mlebench_competition_dir(mlebench_repo, competition_id)
    config_path = comp_dir / "config.yaml"
    if not config_path.is_file() and upstream is not None and (upstream / "config.yaml").is_file():
        config_path = upstream / "config.yaml"
    public_dir = comp_dir / "prepared" / "public"
    answers_root = data_dir if private_root is None else Path(private_root)
    private_dir = answers_root / competition_id / "prepared" / "private"
    hint = prepare_hint(competition_id, data_dir)

    if spec is not None:
        fields = {
            "name": spec.name,
            "competition_type": spec.competition_type,
            "awards_medals": spec.awards_medals,
            "grader_name": spec.grader_name,
            "in_mlebench": spec.in_mlebench,
        }
        answers_path = private_dir / "test.csv"
        sample_path = public_dir / "sample_submission.csv"
        required = [(public_dir / name, _role(name, "public")) for name in spec.public_files]
        if private_root is None:
            required += [(private_dir / name, _role(name, "private")) for name in spec.private_files]
        folders = [(public_dir / name, f"public {name}/ folder") for name in spec.public_folders]
        id_column: str | None = spec.id_column
        target_columns: list[str] | None = None
        id_field = f"the id column of built-in {competition_id}"
        id_fix = f"re-prepare it: {hint}"
    else:
        if not config_path.is_file():
            if not comp_dir.is_dir():
                raise CompetitionError(
                    f"unknown competition {competition_id!r}: not built-in (built-ins: "
                    f"{sorted(BUILTIN_COMPETITIONS)}) and {comp_dir} not found; {hint}"
                )
            raise CompetitionError(
                f"{config_path} not found: {competition_id!r} is not built-in, so it needs "
                f"MLE-bench's config.yaml (give --mlebench-repo MLE_BENCH_CHECKOUT, or copy "
                f"mlebench/competitions/{competition_id}/config.yaml there)"
            )
        cfg = _read_config(config_path, competition_id)
        fields = {k: cfg[k] for k in ("name", "competition_type", "awards_medals", "grader_name")}
        fields["in_mlebench"] = (upstream is not None and config_path.parent == upstream) or cfg["grade_fn"].startswith(
            "mlebench.competitions.")
        answers_path = _resolve(answers_root, cfg["answers"])
        sample_path = _resolve(data_dir, cfg["sample_submission"])
        try:
            get_grader(cfg["grader_name"])
        except CompetitionError as exc:
            raise CompetitionError(f"{config_path}: field 'grader.name': {exc}") from None
        required = [(sample_path, "sample submission")] + ([(answers_path, "private answers")] * (private_root is None))
        folders = []
        known_id, known_targets = MLEBENCH_COLUMNS.get(competition_id, (None, None))
        id_column = cfg["id_column"] or known_id
        target_columns = cfg["target_columns"] or known_targets
        id_field = f"field 'dataset.id_column' of {config_path}"
        id_fix = f"set dataset.id_column in {config_path} to the id column, or fix the file"

    if not public_dir.is_dir():
        raise CompetitionError(f"{public_dir} not found: {hint}")
    check_files(required, hint, folders)
    columns = _read_sample_header(sample_path, id_fix if spec is not None else hint)
    if id_column is None:
        id_column = columns[0]
    check_id_column(sample_path, columns, id_column, id_field, id_fix)
    if target_columns is None:
        target_columns = [c for c in columns if c != id_column]
    unknown = [c for c in target_columns if c not in columns or c == id_column]
    if unknown:
        raise CompetitionError(one_line(
            f"{sample_path}: target column(s) {unknown} (field 'dataset.target_columns' of {config_path}) are not "
            f"columns of the sample submission besides the id {id_column!r}; columns found: {columns}"
        ))
    if private_root is None:
        check_answer_ids(answers_path, sample_path, id_column, f"re-prepare the competition: {hint}")
    description_path = public_dir / "description.md"
    if not description_path.is_file() and upstream is not None:
        description_path = upstream / "description.md"
    if description_path.is_file():
        description = description_path.read_text(encoding="utf-8", errors="replace")
    else:
        description = embedded_description(competition_id) if spec is not None else ""
    leaderboard = comp_dir / "leaderboard.csv"
    if not leaderboard.is_file() and upstream is not None:
        leaderboard = upstream / "leaderboard.csv"
    return Competition(
        id=competition_id,
        **fields,
        data_dir=comp_dir,
        public_dir=public_dir,
        private_dir=private_dir,
        answers_path=answers_path,
        sample_submission_path=sample_path,
        description=description,
        id_column=id_column,
        target_columns=target_columns,
        leaderboard_path=leaderboard if leaderboard.is_file() else None,
    )


def _role(name: str, side: str) -> str:
    """How an error message calls a prepared file, e.g. ``"public training data"``."""
    if side == "private":
        return "private answers" if name == "test.csv" else f"private {name}"
    return {
        "train.csv": "public training data",
        "test.csv": "public test data",
        "sample_submission.csv": "sample submission",
    }.get(name, f"public {name}")


def _resolve(data_dir: Path, relative: str) -> Path:
    """A config path: absolute as is, else relative to ``data_dir`` (MLE-bench's convention)."""
    path = Path(relative).expanduser()
    return path if path.is_absolute() else data_dir / path
