"""The DATA gene: load the public files, engineer features, encode the target.

Interface every DATA gene provides to later genes: ``train_df``, ``test_df``, ``test_ids``,
``target_raw``, ``X``, ``X_test`` (DataFrames with the same columns), ``y`` (numpy array;
label-encoded for classification), ``label_encoder`` and ``CLASSES`` (classification),
``num_cols``, ``cat_cols``, ``TEXT_COLS`` and ``build_preprocessor(kind)`` with kind in
``"tree"`` (dense, ordinal categories, text → TF-IDF + SVD), ``"linear"`` (one-hot + scaling,
sparse TF-IDF) and ``"nonneg"`` (one-hot + min-max, TF-IDF; for naive Bayes).
"""

from __future__ import annotations

from .dataset import DatasetInfo, safe_name

TABULAR_FEATURE_SETS = ("raw", "engineered")
TEXT_FEATURE_SETS = ("word_tfidf", "char_tfidf")

FEATURE_SET_LABELS = {
    "raw": "raw columns",
    "engineered": "engineered features",
    "word_tfidf": "word TF-IDF",
    "char_tfidf": "char TF-IDF",
}


def feature_sets(info: DatasetInfo) -> tuple[str, ...]:
    """The feature sets that make sense for this competition."""
    return TEXT_FEATURE_SETS if info.is_text else TABULAR_FEATURE_SETS


def default_params(info: DatasetInfo, feature_set: str) -> dict:
    """Default numeric constants of a DATA gene."""
    if info.is_text:
        if feature_set == "char_tfidf":
            return {"TFIDF_MAX_FEATURES": 20000, "TFIDF_NGRAMS": 4, "SVD_COMPONENTS": 64}
        return {"TFIDF_MAX_FEATURES": 30000, "TFIDF_NGRAMS": 2, "SVD_COMPONENTS": 64}
    return {"MIN_CATEGORY_FREQ": 5}


def _feature_lines(info: DatasetInfo, feature_set: str) -> list[str]:
    body = ['    """Derived features, computed the same way for train and test."""', "    df = df.copy()"]
    if feature_set != "engineered" or info.is_text:
        body.append("    return df")
        return body
    body.append('    df["n_missing"] = df.isna().sum(axis=1).astype(float)')
    for col, numeric in info.split_cols.items():
        s = safe_name(col)
        body.append(f'    {s.lower()}_parts = df["{col}"].astype("string").str.split("/")')
        for i, is_num in enumerate(numeric):
            part = f"{s.lower()}_parts.str[{i}]"
            if is_num:
                body.append(f'    df["{s}_{i}"] = pd.to_numeric({part}, errors="coerce")')
            else:
                body.append(f'    df["{s}_{i}"] = {part}.astype(object)')
    if info.group_id:
        body += [
            '    group = df[ID_COL].astype(str).str.split("_").str[0]',
            '    df["group_size"] = group.map(group.value_counts()).astype(float)',
            '    df["group_member"] = pd.to_numeric(df[ID_COL].astype(str).str.split("_").str[1], errors="coerce")',
        ]
    if info.spend_cols:
        first = info.spend_cols[0]
        body += [
            f"    spend_cols = {info.spend_cols!r}",
            f'    df["{first}"] = df["{first}"].fillna(0)',
            '    df["total_spend"] = df[spend_cols].fillna(0).sum(axis=1)',
            '    df["log_total_spend"] = np.log1p(df["total_spend"])',
            '    df["zero_spend"] = (df["total_spend"] == 0).astype(float)',
            "    for col in spend_cols:",
            '        df["log_" + col] = np.log1p(df[col].fillna(0))',
        ]
    body.append("    return df")
    return body


def render_data_gene(info: DatasetInfo, feature_set: str, params: dict | None = None) -> str:
    """Text of a DATA gene for ``feature_set`` with numeric ``params`` (see default_params)."""
    p = default_params(info, feature_set)
    p.update(params or {})
    drop = [c for c in info.drop_cols if c not in info.text_cols]
    lines = [
        "# Data: read ./input, engineer features, encode the target; defines X, y, X_test,",
        "# test_ids and build_preprocessor(kind) for the model gene.",
        f"FEATURE_SET = {feature_set!r}",
    ]
    lines += [f"{k} = {v!r}" for k, v in p.items()]
    lines += [
        f"DROP_COLS = {drop!r}",
        f"TEXT_COLS = {list(info.text_cols)!r}",
        "",
        'train_df = pd.read_csv(os.path.join(INPUT_DIR, "train.csv"))',
        'test_df = pd.read_csv(os.path.join(INPUT_DIR, "test.csv"))',
        "test_ids = test_df[ID_COL].values",
        "target_raw = train_df[TARGET_COL]",
        "",
        "",
        "def add_features(df):",
    ]
    lines += _feature_lines(info, feature_set)
    lines += [
        "",
        "",
        "X = add_features(train_df.drop(columns=[TARGET_COL]))",
        "X_test = add_features(test_df)",
        "feature_cols = [c for c in X.columns if c in X_test.columns and (c != ID_COL or c in TEXT_COLS)",
        "                and c not in DROP_COLS]  # an id that is the text itself stays a feature",
        "X = X[feature_cols].copy()",
        "X_test = X_test[feature_cols].copy()",
        "num_cols = [c for c in feature_cols if c not in TEXT_COLS and pd.api.types.is_numeric_dtype(X[c])",
        "            and not pd.api.types.is_bool_dtype(X[c])]",
        "cat_cols = [c for c in feature_cols if c not in TEXT_COLS and c not in num_cols]",
        "for col in cat_cols:",
        "    X[col] = X[col].astype(str)",
        "    X_test[col] = X_test[col].astype(str)",
        "for col in TEXT_COLS:",
        '    X[col] = X[col].fillna("")',
        '    X_test[col] = X_test[col].fillna("")',
    ]
    if info.task == "classification":
        lines += [
            "label_encoder = LabelEncoder()",
            "y = label_encoder.fit_transform(target_raw)",
            "CLASSES = [str(c) for c in label_encoder.classes_]",
        ]
    else:
        lines += ["y = target_raw.to_numpy(dtype=float)"]
    lines += [
        'print(f"train {X.shape}, test {X_test.shape}, {len(num_cols)} numeric, {len(cat_cols)} categorical, "',
        '      f"{len(TEXT_COLS)} text columns")',
        "",
        "",
        "def build_preprocessor(kind):",
        '    """Column preprocessing for a model family: "tree", "linear" or "nonneg"."""',
        "    transformers = []",
        "    if num_cols:",
        '        if kind == "tree":',
        '            num = SimpleImputer(strategy="median")',
        '        elif kind == "nonneg":',
        '            num = make_pipeline(SimpleImputer(strategy="median"), MinMaxScaler())',
        "        else:",
        '            num = make_pipeline(SimpleImputer(strategy="median"), StandardScaler())',
        '        transformers.append(("num", num, num_cols))',
        "    if cat_cols:",
        '        if kind == "tree":',
        '            cat = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1)',
        "        else:",
        '            cat = OneHotEncoder(handle_unknown="infrequent_if_exist",',
        '                                min_frequency=int(cfg("MIN_CATEGORY_FREQ", 5)))',
        '        transformers.append(("cat", cat, cat_cols))',
        "    for col in TEXT_COLS:",
        '        analyzer = "char_wb" if FEATURE_SET == "char_tfidf" else "word"',
        '        ngrams = (2 if analyzer == "char_wb" else 1, int(cfg("TFIDF_NGRAMS", 2)))',
        '        tfidf = TfidfVectorizer(analyzer=analyzer, ngram_range=ngrams, sublinear_tf=True, min_df=2,',
        '                                max_features=int(cfg("TFIDF_MAX_FEATURES", 30000)))',
        '        if kind == "tree":',
        '            text = make_pipeline(tfidf, TruncatedSVD(n_components=int(cfg("SVD_COMPONENTS", 64)),',
        "                                                     random_state=0))",
        "        else:",
        "            text = tfidf",
        '        transformers.append(("text_" + col, text, col))',
        '    return ColumnTransformer(transformers, sparse_threshold=0.0 if kind == "tree" else 0.3)',
        "",
        "",
    ]
    return "\n".join(lines)
