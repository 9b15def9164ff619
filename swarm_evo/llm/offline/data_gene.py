"""The DATA gene: load the public files, engineer features, encode the target.

Interface every DATA gene provides to later genes: ``train_df``, ``test_df``, ``test_ids``,
``target_raw``, ``X``, ``X_test`` (DataFrames with the same columns), ``y`` (numpy array;
label-encoded for classification), ``label_encoder`` and ``CLASSES`` (classification),
``num_cols``, ``cat_cols``, ``TEXT_COLS`` and ``build_preprocessor(kind)`` with kind in
``"tree"`` (dense, ordinal categories, text → TF-IDF + SVD), ``"linear"`` (one-hot + scaling,
sparse TF-IDF) and ``"nonneg"`` (one-hot + min-max, TF-IDF; for naive Bayes).

Image competitions (``DatasetInfo.is_image``): the gene reads each image with pillow
(``from PIL import Image`` inside the gene, written whether or not the sandbox lists pillow:
a missing package surfaces as ModuleNotFoundError in the debug chain), converts it to the
competition's mode (``"L"`` or ``"RGB"``), resizes it to ``IMAGE_SIZE`` x ``IMAGE_SIZE`` pixels
and scales it to [0, 1] (÷ 255). ``X``/``X_test`` are then numeric DataFrames, one row per image
in ``train.csv`` / test-id order: ``px_<i>`` (the flattened pixels), plus ``hog_<i>``
(``skimage.feature.hog``, feature set ``pixels_hog``, offered only when the sandbox lists
scikit-image) or ``row_<i>``/``col_<i>``/``stat_<i>`` (mean intensity per row and column, mean,
std and ink share; ``pixels_stats``, numpy only). ``cat_cols`` and ``TEXT_COLS`` are empty, so
every tabular MODEL family trains on them unchanged; ``build_preprocessor("tree")`` reduces
the features to ``PCA_COMPONENTS`` principal components (tree ensembles on hundreds of raw
pixels take minutes), ``"linear"`` standardises and ``"nonneg"`` min-max scales them.
"""

from __future__ import annotations

from .dataset import DatasetInfo, safe_name

TABULAR_FEATURE_SETS = ("raw", "engineered")
TEXT_FEATURE_SETS = ("word_tfidf", "char_tfidf")
IMAGE_FEATURE_SETS = ("pixels", "pixels_hog", "pixels_stats")
IMAGE_SIZE_RANGE = (8, 64)
"""The gene clamps ``IMAGE_SIZE`` (a mutable constant) to this range of pixels a side."""

FEATURE_SET_LABELS = {
    "raw": "raw columns",
    "engineered": "engineered features",
    "word_tfidf": "word TF-IDF",
    "char_tfidf": "char TF-IDF",
    "pixels": "raw pixels",
    "pixels_hog": "pixels + HOG",
    "pixels_stats": "pixels + intensity profiles",
}


def feature_sets(info: DatasetInfo) -> tuple[str, ...]:
    """The feature sets that make sense for this competition (images: HOG only with scikit-image)."""
    if info.is_image:
        if "scikit-image" in info.packages:
            return IMAGE_FEATURE_SETS
        return tuple(f for f in IMAGE_FEATURE_SETS if f != "pixels_hog")
    return TEXT_FEATURE_SETS if info.is_text else TABULAR_FEATURE_SETS


def default_image_size(info: DatasetInfo) -> int:
    """Default side (pixels) images are resized to: the native side, at most 16 (256 pixels
    per grayscale image keep every tabular family fast), at least 8."""
    native = min(info.image_shape) if min(info.image_shape) > 0 else 16
    return max(IMAGE_SIZE_RANGE[0], min(16, native))


def default_params(info: DatasetInfo, feature_set: str) -> dict:
    """Default numeric constants of a DATA gene."""
    if info.is_image:
        params = {"IMAGE_SIZE": default_image_size(info), "PCA_COMPONENTS": 40}
        if feature_set == "pixels_hog":
            params.update({"HOG_CELL": 4, "HOG_ORIENTATIONS": 9})
        return params
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


def _image_feature_lines(info: DatasetInfo, feature_set: str) -> list[str]:
    """``image_features(images)``: the feature frame of a (n, size, size[, 3]) array in [0, 1]."""
    body = [
        "def image_features(images):",
        '    """One row per image: the flattened pixels, plus the feature set\'s extra features."""',
        "    n = len(images)",
        '    parts = {"px": images.reshape(n, -1)}',
    ]
    if feature_set == "pixels_hog":
        body += [
            "    cell = max(2, min(int(HOG_CELL), images.shape[1] // 2))  # at least 2x2 cells per image",
            '    parts["hog"] = np.stack([',
            "        hog(im, orientations=int(HOG_ORIENTATIONS), pixels_per_cell=(cell, cell), cells_per_block=(2, 2),",
            "            channel_axis=-1 if im.ndim == 3 else None)",
            "        for im in images])",
        ]
    elif feature_set == "pixels_stats":
        body += [
            "    gray = images.mean(axis=-1) if images.ndim == 4 else images",
            '    parts["row"] = gray.mean(axis=2)  # mean intensity of each row',
            '    parts["col"] = gray.mean(axis=1)  # ... and of each column',
            '    parts["stat"] = np.column_stack([gray.mean(axis=(1, 2)), gray.std(axis=(1, 2)),',
            "                                     (gray > 0.5).mean(axis=(1, 2))])",
        ]
    body += [
        "    frames = [pd.DataFrame(v, columns=[f\"{k}_{i}\" for i in range(v.shape[1])]) for k, v in parts.items()]",
        "    return pd.concat(frames, axis=1)",
    ]
    return body


def _render_image_data_gene(info: DatasetInfo, feature_set: str, p: dict) -> list[str]:
    """The DATA gene of an image competition, up to the target encoding (see the module doc)."""
    lo, hi = IMAGE_SIZE_RANGE
    lines = [
        "# Data: read the images of ./input (named by the id column), turn each into pixel features;",
        "# defines X, y, X_test, test_ids and build_preprocessor(kind) for the model gene.",
        "from PIL import Image",
        "from sklearn.decomposition import PCA",
    ]
    if feature_set == "pixels_hog":
        lines.append("from skimage.feature import hog")
    lines += ["", f"FEATURE_SET = {feature_set!r}"]
    lines += [f"{k} = {v!r}" for k, v in p.items()]
    lines += [
        f"TRAIN_IMAGE_DIR = {info.image_train_dir!r}",
        f"TEST_IMAGE_DIR = {info.image_test_dir!r}",
        f"IMAGE_NAME = {info.image_name!r}  # file name of an image from its id",
        f"IMAGE_MODE = {info.image_mode!r}",
        "DROP_COLS = []",
        "TEXT_COLS = []",
        "",
        'train_df = pd.read_csv(os.path.join(INPUT_DIR, "train.csv"))',
        f'test_df = pd.read_csv(os.path.join(INPUT_DIR, "{info.test_file}"))[[ID_COL]]',
        "test_ids = test_df[ID_COL].values",
        "target_raw = train_df[TARGET_COL]",
        "",
        "",
        "def load_images(folder, ids):",
        '    """The images named by ``ids``, resized: float32 array (n, size, size[, 3]) in [0, 1]."""',
        f"    size = min(max(int(IMAGE_SIZE), {lo}), {hi})",
        "    out = []",
        "    for ident in ids:",
        "        with Image.open(os.path.join(INPUT_DIR, folder, IMAGE_NAME.format(ident))) as im:",
        "            im = im.convert(IMAGE_MODE).resize((size, size), Image.BILINEAR)",
        "            out.append(np.asarray(im, dtype=np.float32) / 255.0)",
        "    return np.stack(out)",
        "",
        "",
    ]
    lines += _image_feature_lines(info, feature_set)
    lines += [
        "",
        "",
        "X = image_features(load_images(TRAIN_IMAGE_DIR, train_df[ID_COL]))",
        "X_test = image_features(load_images(TEST_IMAGE_DIR, test_ids))",
        "feature_cols = list(X.columns)",
        "num_cols = list(feature_cols)",
        "cat_cols = []",
    ]
    return lines


def render_data_gene(info: DatasetInfo, feature_set: str, params: dict | None = None) -> str:
    """Text of a DATA gene for ``feature_set`` with numeric ``params`` (see default_params)."""
    p = default_params(info, feature_set)
    p.update(params or {})
    if info.is_image:
        return _render_data_gene_tail(info, _render_image_data_gene(info, feature_set, p))
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
    return _render_data_gene_tail(info, lines)


IMAGE_PREPROCESSOR = [
    "def build_preprocessor(kind):",
    '    """Pixel preprocessing for a model family: "tree" (standardise, then PCA to PCA_COMPONENTS',
    '    dense components: trees on hundreds of raw pixels are slow), "linear" (standardise) or',
    '    "nonneg" (min-max)."""',
    '    if kind == "tree":',
    "        n_components = max(2, min(int(PCA_COMPONENTS), len(num_cols), len(X) - 1))",
    "        return make_pipeline(StandardScaler(), PCA(n_components=n_components, random_state=0))",
    '    if kind == "nonneg":',
    "        return MinMaxScaler()",
    "    return StandardScaler()",
    "",
    "",
]


def _render_data_gene_tail(info: DatasetInfo, lines: list[str]) -> str:
    """The target encoding, a shape line and ``build_preprocessor(kind)`` after ``lines``
    (images: :data:`IMAGE_PREPROCESSOR`)."""
    lines = list(lines)
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
    ]
    if info.is_image:
        return "\n".join(lines + IMAGE_PREPROCESSOR)
    lines += [
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
