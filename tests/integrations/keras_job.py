"""A tiny Keras 3 job on the torch backend: imported by the tests, and run as a process of its own by
those about the end of a process.

    python keras_job.py <table> '<json options>'

Options: ``lr``, ``epochs``, ``initial_epoch``, ``run_id``, ``fail_in_epoch`` (raise there, caught, then
exit normally), ``evaluate`` and ``predict`` (after fit).
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported; no TensorFlow needed

import keras
import numpy as np

from tallyboard.integrations.keras import TallyboardCallback

DATA = np.random.default_rng(0).normal(size=(32, 2)).astype("float32")
TARGET = DATA.sum(axis=1, keepdims=True)


class FailIn(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("diverged")


def model(lr=0.05):
    keras.utils.set_random_seed(0)
    tiny = keras.Sequential(
        [keras.Input((2,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)]
    )
    tiny.compile(optimizer=keras.optimizers.SGD(lr), loss="mse", metrics=["mae"])
    return tiny


def fit(tiny, callbacks, epochs=2, initial_epoch=0):
    return tiny.fit(
        DATA,
        TARGET,
        batch_size=8,
        epochs=epochs,
        initial_epoch=initial_epoch,
        validation_data=(DATA, TARGET),
        callbacks=callbacks,
        verbose=0,
    )


def main(table, options):
    callback = TallyboardCallback(table=table, experiment_name="keras-job", run_id=options.get("run_id"))
    tiny = model(options.get("lr", 0.05))
    extra = [FailIn(options["fail_in_epoch"])] if "fail_in_epoch" in options else []
    try:
        fit(tiny, [callback, *extra], options.get("epochs", 2), options.get("initial_epoch", 0))
    except RuntimeError as error:
        print(f"caught {error}", flush=True)
    if options.get("evaluate"):
        tiny.evaluate(DATA, TARGET, verbose=0, callbacks=[callback])
    print("JOB " + json.dumps({"run_id": callback.writer.run_id}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
