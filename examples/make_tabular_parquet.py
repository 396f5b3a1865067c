"""Write scikit-learn's breast-cancer table as Parquet for ``examples/tabular_parquet.toml``.

30 numeric feature columns (``f00`` ... ``f29``, standardised) and an int ``label``, in
row groups of 64 rows, like the tables a Spark job writes::

    python examples/make_tabular_parquet.py examples/data/breast_cancer.parquet
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def main(out: str) -> None:
    """Write the table to ``out`` (its folder is created)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    x = (d.data - d.data.mean(axis=0)) / d.data.std(axis=0)
    columns = {f"f{i:02d}": pa.array(x[:, i].astype(np.float32)) for i in range(x.shape[1])}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({**columns, "label": pa.array(d.target.astype(np.int64))}), out, row_group_size=64)
    print(f"wrote {len(d.target)} rows, {x.shape[1]} feature columns to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/data/breast_cancer.parquet")
