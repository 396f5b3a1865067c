"""distbench from a plain Python script: a Keras model and NumPy arrays defined here, compared
under single, mirrored, horovod and spark_ps:adag with 2 workers; the table, the
recommendation and the records read back. The same as examples/compare.ipynb.

    python examples/compare.py [--out runs/compare] [--strategies single,horovod] [--epochs 4]
"""

import argparse

import keras
import numpy as np
from sklearn.datasets import load_digits

import distbench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="run directory [default: runs/<timestamp>]")
    ap.add_argument("--strategies", default="single,mirrored,horovod,spark_ps:adag")
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args()

    # the model: any keras.Model; its weights become every strategy's initial weights
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10)])
    # the data: NumPy arrays (x, y); distbench holds out a stratified test split
    digits = load_digits()
    x, y = (digits.data / 16.0).astype(np.float32), digits.target

    res = distbench.compare(model, (x, y), strategies=args.strategies, workers=2, epochs=args.epochs, repeats=1,
                            target_accuracy=0.9, out=args.out, training={"learning_rate": 0.2})
    print(res.records[["strategy", "workers", "status", "final_test_accuracy", "time_to_target_s", "train_s"]])
    print(res.advise())
    print("report:", res.report.get("html"))


if __name__ == "__main__":
    main()
