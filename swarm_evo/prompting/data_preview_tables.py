"""The data preview of CSV tables: shape, columns, dtypes, missing rates, numeric ranges, a few
rows, and the likely target column with its distribution."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from swarm_evo.prompting.data_preview_format import (
    FULL_READ_BYTES,
    SAMPLE_ROWS,
    WIDE_TABLE,
    file_size,
    fmt_cell,
    fmt_num,
    fmt_pct,
    rel_path,
)


def table_order(path: Path) -> tuple[int, str]:
    """Sort key of CSV files: train, test, sample submission, then the rest."""
    name = path.name.lower()
    rank = 0 if "train" in name else 1 if "test" in name else 2 if "sample" in name else 3
    return rank, path.as_posix()


def _count_rows(path: Path) -> int | None:
    """Approximate data rows of a plain CSV by counting newlines (header excluded)."""
    if not path.name.lower().endswith(".csv"):
        return None
    n = 0
    last = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    if last and last != b"\n":
        n += 1
    return max(0, n - 1)


class Table:
    """A loaded (or sampled) CSV and how to describe it."""

    def __init__(self, path: Path, df: pd.DataFrame | None, rows: int | None, sampled: bool, error: str | None):
        self.path, self.df, self.rows, self.sampled, self.error = path, df, rows, sampled, error

    @classmethod
    def load(cls, path: Path) -> "Table":
        try:
            size = file_size(path)
            if size <= FULL_READ_BYTES:
                df = pd.read_csv(path, low_memory=False)
                return cls(path, df, len(df), False, None)
            df = pd.read_csv(path, nrows=SAMPLE_ROWS, low_memory=False)
            return cls(path, df, _count_rows(path), True, None)
        except Exception as exc:  # noqa: BLE001 - reported in the preview
            return cls(path, None, None, False, f"{type(exc).__name__}: {str(exc)[:200]}")

    def describe(self, root: Path, earlier: list[tuple[Path, "Table"]]) -> str:
        name = rel_path(root, self.path)
        if self.df is None:
            return f"### {name}\ncould not be read: {self.error}"
        df = self.df
        rows = f"{self.rows:,}" if self.rows is not None else "?"
        note = f" (statistics from the first {len(df):,} rows)" if self.sampled else ""
        lines = [f"### {name}: {rows} rows × {df.shape[1]} columns{note}"]
        same = None
        for other_path, other in earlier:
            if other.df is not None and df.shape[1] >= 3 and set(df.columns) <= set(other.df.columns):
                same = (other_path, other)
                break
        if same is not None:
            other_path, other = same
            dropped = [c for c in other.df.columns if c not in df.columns]
            extra = f" without {', '.join(map(str, dropped[:10]))}" if dropped else ""
            lines.append(f"Columns: same as {rel_path(root, other_path)}{extra}.")
            miss = df.isna().mean()
            miss = miss[miss > 0].sort_values(ascending=False)
            if len(miss):
                lines.append("Missing: " + ", ".join(f"{c} {v:.1%}" for c, v in miss.head(15).items()))
        elif df.shape[1] > WIDE_TABLE:
            lines.extend(self._columns_compact(df))
        else:
            lines.extend(self._columns_detailed(df))
        lines.append(self._rows(df))
        return "\n".join(lines)

    @staticmethod
    def _column_summary(s: pd.Series) -> str:
        parts: list[str] = []
        miss = s.isna().mean()
        if pd.api.types.is_bool_dtype(s):
            vc = s.value_counts(normalize=True)
            parts.append(", ".join(f"{k}: {v:.1%}" for k, v in vc.items()))
        elif pd.api.types.is_numeric_dtype(s):
            nn = s.dropna()
            if len(nn):
                parts.append(f"range [{fmt_num(nn.min())}, {fmt_num(nn.max())}], mean {fmt_num(nn.mean())}")
            parts.append(f"{s.nunique()} unique")
        else:
            nun = s.nunique()
            nn = s.dropna().astype(str)
            avg = nn.str.len().mean() if len(nn) else 0
            if avg > 50:
                parts.append(f"free text, mean length {avg:.0f} chars, {nun} unique")
            else:
                top = s.value_counts().head(4)
                ex = ", ".join(f"{fmt_cell(k, 20)!s}" for k in top.index)
                parts.append(f"{nun} unique, e.g. {ex}")
        if miss > 0:
            parts.append(f"missing {miss:.1%}")
        return "; ".join(parts)

    def _columns_detailed(self, df: pd.DataFrame) -> list[str]:
        out = ["Columns:"]
        for c in df.columns:
            out.append(f"- {c} ({df[c].dtype}): {self._column_summary(df[c])}")
        return out

    @staticmethod
    def _columns_compact(df: pd.DataFrame) -> list[str]:
        num = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
        other = [c for c in df.columns if c not in num]
        miss = df.isna().mean()
        out = []
        items = []
        for c in num:
            nn = df[c].dropna()
            rng = f"[{fmt_num(nn.min())}, {fmt_num(nn.max())}]" if len(nn) else "[empty]"
            m = f" {fmt_pct(miss[c])} missing" if miss[c] > 0 else ""
            items.append(f"{c} {rng}{m}")
        out.append(f"Numeric columns ({len(num)}): " + "; ".join(items))
        items = []
        for c in other:
            m = f", {fmt_pct(miss[c])} missing" if miss[c] > 0 else ""
            items.append(f"{c} ({df[c].nunique()} uniq{m})")
        if other:
            out.append(f"Other columns ({len(other)}, object/bool/categorical): " + "; ".join(items))
        return out

    @staticmethod
    def _rows(df: pd.DataFrame, n: int = 3, max_cols: int = 15) -> str:
        cols = list(df.columns[:max_cols])
        more = f" (+{df.shape[1] - max_cols} more columns)" if df.shape[1] > max_cols else ""
        lines = [f"First rows{more}:", ",".join(fmt_cell(c, 25) for c in cols)]
        for row in df[cols].head(n).astype(object).itertuples(index=False):
            lines.append(",".join(fmt_cell(v) for v in row))
        return "\n".join(lines)


def _distribution(s: pd.Series) -> str:
    s = s.dropna()
    if len(s) == 0:
        return "all values missing"
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) and s.nunique() > 20:
        q = s.quantile([0, 0.25, 0.5, 0.75, 1.0]).tolist()
        skew = float(s.skew()) if len(s) > 2 else 0.0
        text = (
            f"numeric: min {fmt_num(q[0])}, p25 {fmt_num(q[1])}, median {fmt_num(q[2])}, p75 {fmt_num(q[3])}, "
            f"max {fmt_num(q[4])}; mean {fmt_num(s.mean())}, std {fmt_num(s.std())}, skew {skew:.2f}"
        )
        if skew > 1 and q[0] >= 0:
            text += " (right-skewed, non-negative: a log1p transform may help)"
        return text
    vc = s.value_counts()
    shown = ", ".join(f"{fmt_cell(k, 25)}: {v} ({v / len(s):.1%})" for k, v in vc.head(10).items())
    more = f", ... {len(vc) - 10} more classes" if len(vc) > 10 else ""
    return f"{len(vc)} classes: {shown}{more}"


def target_section(root: Path, tables: dict[Path, Table]) -> str:
    """Likely target columns (in train, not in test) and their distribution."""
    loaded = {p: t for p, t in tables.items() if t.df is not None}
    train = next((p for p in loaded if "train" in p.name.lower()), None)
    test = next((p for p in loaded if "test" in p.name.lower()), None)
    sample = next((p for p in loaded if "sample" in p.name.lower() or "submission" in p.name.lower()), None)
    lines = ["## Likely target"]
    if sample is not None:
        cols = list(loaded[sample].df.columns)
        shown = ", ".join(map(str, cols[:20])) + (f", ... ({len(cols)} columns)" if len(cols) > 20 else "")
        lines.append(f"Submission format ({rel_path(root, sample)}): columns {shown}; {loaded[sample].rows:,} rows.")
    if train is None:
        return "\n".join(lines) if len(lines) > 1 else ""
    tdf = loaded[train].df
    targets: list[str] = []
    if test is not None:
        targets = [c for c in tdf.columns if c not in set(loaded[test].df.columns)]
    if not targets and sample is not None:
        scols = list(loaded[sample].df.columns)
        targets = [c for c in scols[1:] if c in tdf.columns]
        if not targets:  # e.g. one probability column per class: find the label column
            wanted = {str(c) for c in scols[1:]}
            for c in tdf.columns:
                if tdf[c].dtype == object and tdf[c].nunique() <= 200 and wanted <= set(tdf[c].dropna().astype(str).unique()):
                    targets = [c]
                    lines.append(f"The submission has one column per class of `{c}` (predict class probabilities).")
                    break
    if not targets:
        last = tdf.columns[-1]
        lines.append(
            f"No test file or sample submission to compare with {rel_path(root, train)}; guess: the "
            f"last column `{last}` (check the description)."
        )
        lines.append(f"- {last} ({tdf[last].dtype}): {_distribution(tdf[last])}")
        return "\n".join(lines)
    where = f"columns of {rel_path(root, train)} that are not in {rel_path(root, test)}" if test is not None else "from the sample submission"
    lines.append(f"Target candidate(s) ({where}): {', '.join(map(str, targets[:10]))}")
    for c in targets[:5]:
        lines.append(f"- {c} ({tdf[c].dtype}): {_distribution(tdf[c])}")
    return "\n".join(lines)
