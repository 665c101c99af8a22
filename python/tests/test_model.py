"""Tests of spindle.model.save: real exporters, the real spindle binary's
publish, and the real ONNX Runtime scoring what was saved.

The PyTorch tests run where torch and onnxruntime import (the py venv of
make deps); the scikit-learn and TensorFlow tests where skl2onnx, or
tensorflow and tf2onnx, and onnxruntime do (the test venv). Elsewhere they
skip.
"""

import importlib.util
import json
import os
import shutil
import sys
import unittest

import support  # noqa: F401  (puts the checkout's package first on sys.path)

import numpy as np

import spindle
from spindle import _report
from spindle._errors import SpindleError


def has(*modules):
    return all(importlib.util.find_spec(m) is not None for m in modules)


def torch_works():
    """Say whether torch imports and shares arrays with this numpy (Debian's torch 1.13 cannot with numpy 2)."""
    if not has("torch"):
        return False
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch

            torch.from_numpy(np.ones(1))
        return True
    except Exception:  # noqa: BLE001 (any failure means: not here)
        return False


class _StoreTest(unittest.TestCase):
    def setUp(self):
        self.store = support.short_tempdir(self)
        self.env = dict(os.environ)
        self.addCleanup(self._restore)
        os.environ["SPINDLE_BINARY"] = support.spindle_binary(self)
        for k in ("SPINDLE_MODELS_DIR", "SPINDLE_JOB_ID", "SPINDLE_LABEL_COLUMN", "SPINDLE_REPORT_SOCKET"):
            os.environ.pop(k, None)
        _report.last_values.clear()

    def _restore(self):
        os.environ.clear()
        os.environ.update(self.env)

    def manifest(self, version):
        with open(os.path.join(version.uri, "manifest.json"), encoding="utf-8") as f:
            return json.load(f)

    def score(self, version, x):
        import onnxruntime as ort

        sess = ort.InferenceSession(os.path.join(version.uri, "model.onnx"), providers=["CPUExecutionProvider"])
        return {o.name: v for o, v in zip(sess.get_outputs(), sess.run(None, {"features": x}))}


@unittest.skipUnless(torch_works() and has("onnxruntime"), "needs torch (with a numpy it works with) and onnxruntime (the py venv of make deps)")
class TorchSaveTest(_StoreTest):
    def test_mlp_scores_in_onnxruntime_as_in_torch(self):
        import torch

        torch.manual_seed(0)
        rng = np.random.default_rng(1)
        x = rng.normal(size=(256, 4)).astype(np.float32)
        y = (x @ np.array([1.0, -2.0, 0.5, 0.0], dtype=np.float32) > 0).astype(np.float32)
        mlp = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1), torch.nn.Sigmoid())
        opt = torch.optim.SGD(mlp.parameters(), lr=0.5)
        for _ in range(50):
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy(mlp(torch.from_numpy(x)).squeeze(1), torch.from_numpy(y))
            loss.backward()
            opt.step()
        os.environ["SPINDLE_MODELS_DIR"] = self.store  # as a job gets it
        os.environ["SPINDLE_JOB_ID"] = "job-42"
        os.environ["SPINDLE_REPORT_SOCKET"] = os.path.join(self.store, "no-executor")
        spindle.report(step=50, loss=float(loss))
        v = spindle.model.save(mlp, "mlp", example=(x[:8], y[:8]), columns=["a", "b", "c", "d"], label="y")
        self.assertEqual((v.name, v.version), ("mlp", 1))
        held_out = rng.normal(size=(100, 4)).astype(np.float32)
        with torch.no_grad():
            want = mlp(torch.from_numpy(held_out)).numpy()
        got = self.score(v, held_out)["output"]
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
        m = self.manifest(v)
        self.assertEqual(m["job_id"], "job-42")
        self.assertEqual([c["name"] for c in m["feed"]["schema"]], ["a", "b", "c", "d"])
        self.assertEqual(m["feed"]["label"], "y")
        self.assertAlmostEqual(m["metrics"]["loss"], float(loss), places=6)
        self.assertIn("torch", m["frameworks"])
        self.assertEqual(m["inputs"][0]["name"], "features")
        self.assertEqual(m["inputs"][0]["shape"], [-1, 4])
        self.assertEqual(self.manifest(spindle.model.save(mlp, "mlp", example=x[:8])).get("version"), 2)


@unittest.skipUnless(has("sklearn", "skl2onnx", "onnxruntime"), "needs scikit-learn, skl2onnx and onnxruntime (the test venv of make deps)")
class SklearnSaveTest(_StoreTest):
    def test_sgd_classifier_scores_in_onnxruntime_as_in_sklearn(self):
        from sklearn.linear_model import SGDClassifier

        rng = np.random.default_rng(2)
        x = rng.normal(size=(500, 3)).astype(np.float32)
        y = (x[:, 0] - x[:, 2] > 0).astype(np.int64)
        clf = SGDClassifier(loss="log_loss", random_state=0).fit(x, y)
        batch = {"u": x[:10, 0], "v": x[:10, 1], "w": x[:10, 2], "label": y[:10]}
        v = spindle.model.save(clf, "sgd", example=batch, store=self.store, label="label")
        held_out = rng.normal(size=(200, 3)).astype(np.float32)
        got = self.score(v, held_out)
        np.testing.assert_allclose(got["probabilities"], clf.predict_proba(held_out), atol=1e-5, rtol=0)
        np.testing.assert_array_equal(got["label"], clf.predict(held_out))
        m = self.manifest(v)
        self.assertEqual([c["name"] for c in m["feed"]["schema"]], ["u", "v", "w"])
        self.assertEqual(m["feed"]["label"], "label")
        self.assertIn("skl2onnx", m["frameworks"])


@unittest.skipUnless(has("tensorflow", "tf2onnx", "onnxruntime"), "needs tensorflow, tf2onnx and onnxruntime (the test venv of make deps)")
class TensorFlowSaveTest(_StoreTest):
    def test_keras_mlp_scores_in_onnxruntime_as_in_keras(self):
        import tensorflow as tf
        import tf2onnx

        tf.keras.utils.set_random_seed(0)
        rng = np.random.default_rng(3)
        x = rng.normal(size=(256, 3)).astype(np.float32)
        y = (x @ np.array([1.5, -1.0, 0.25], dtype=np.float32) > 0).astype(np.float32)
        # Dropout makes a graph traced in training mode score differently.
        mlp = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(16, activation="relu"),
                                   tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(1, activation="sigmoid")])
        mlp.compile(optimizer=tf.keras.optimizers.SGD(0.5), loss="binary_crossentropy")
        loss = mlp.fit(x, y, batch_size=32, epochs=2, verbose=0).history["loss"][-1]
        batch = {"p": x[:8, 0], "q": x[:8, 1], "r": x[:8, 2], "clicked": y[:8]}
        v = spindle.model.save(mlp, "keras-mlp", example=batch, store=self.store, label="clicked", metrics={"loss": loss})
        self.assertEqual((v.name, v.version), ("keras-mlp", 1))
        held_out = rng.normal(size=(100, 3)).astype(np.float32)
        want = mlp.predict(held_out, verbose=0)
        got = self.score(v, held_out)["output"]
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
        m = self.manifest(v)
        self.assertEqual(m["frameworks"]["tensorflow"], tf.__version__)
        self.assertEqual(m["frameworks"]["tf2onnx"], tf2onnx.__version__)
        self.assertEqual([c["name"] for c in m["feed"]["schema"]], ["p", "q", "r"])
        self.assertEqual({c["type"] for c in m["feed"]["schema"]}, {"float32"})
        self.assertEqual(m["feed"]["label"], "clicked")
        self.assertAlmostEqual(m["metrics"]["loss"], loss, places=6)
        self.assertEqual(m["inputs"][0]["name"], "features")
        self.assertEqual(m["inputs"][0]["type"], "float")
        self.assertEqual(m["inputs"][0]["shape"], [-1, 3])
        self.assertEqual(m["outputs"][0]["name"], "output")

    def test_outputs_of_a_two_headed_model_are_named_in_order(self):
        import tensorflow as tf

        tf.keras.utils.set_random_seed(1)
        inp = tf.keras.Input((4,))
        hidden = tf.keras.layers.Dense(8, activation="tanh")(inp)
        model = tf.keras.Model(inp, [tf.keras.layers.Dense(1, activation="sigmoid")(hidden), tf.keras.layers.Dense(3)(hidden)])
        v = spindle.model.save(model, "two-heads", example=np.zeros((2, 4), dtype=np.float32), store=self.store)
        held_out = np.random.default_rng(4).normal(size=(50, 4)).astype(np.float32)
        want = model.predict(held_out, verbose=0)
        got = self.score(v, held_out)
        self.assertEqual(sorted(got), ["output_0", "output_1"])
        np.testing.assert_allclose(got["output_0"], want[0], atol=1e-5, rtol=0)
        np.testing.assert_allclose(got["output_1"], want[1], atol=1e-5, rtol=0)

    def test_op_without_onnx_form_is_refused_naming_it(self):
        import tensorflow as tf

        class Noise(tf.keras.layers.Layer):
            def call(self, x):
                return x + tf.random.stateless_uniform(tf.shape(x), seed=[1, 2])

        model = tf.keras.Sequential([tf.keras.Input((2,)), Noise(), tf.keras.layers.Dense(1)])
        with self.assertRaisesRegex(SpindleError, r"could not convert Sequential: TensorFlow ops with no ONNX form at opset 13: "
                                                  r"StatelessRandomUniformV2 \(sequential\S*/StatelessRandomUniformV2\) \(pass a higher opset="):
            spindle.model.save(model, "noisy", example=np.zeros((1, 2)), store=self.store)
        self.assertFalse(os.listdir(self.store))

    def test_without_tf2onnx_says_what_to_install(self):
        import tensorflow as tf

        mlp = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
        saved = sys.modules.get("tf2onnx")
        sys.modules["tf2onnx"] = None  # as if not installed: importing it raises ImportError
        try:
            with self.assertRaisesRegex(SpindleError, r"TensorFlow models need tf2onnx \(pip install tf2onnx\)"):
                spindle.model.save(mlp, "keras", example=np.zeros((1, 2)), store=self.store)
        finally:
            if saved is None:
                del sys.modules["tf2onnx"]
            else:
                sys.modules["tf2onnx"] = saved
        self.assertFalse(os.listdir(self.store))


class SaveRefusalTest(_StoreTest):
    def test_bad_input_says_what(self):
        with self.assertRaisesRegex(SpindleError, "no model store"):
            spindle.model.save(object(), "m", example=np.zeros((1, 2)))
        with self.assertRaisesRegex(SpindleError, "model name 'a/b'"):
            spindle.model.save(object(), "a/b", example=np.zeros((1, 2)), store=self.store)
        with self.assertRaisesRegex(SpindleError, "pass example="):
            spindle.model.save(object(), "m", store=self.store)
        with self.assertRaisesRegex(SpindleError, "cannot tell the framework of object"):
            spindle.model.save(object(), "m", example=np.zeros((1, 2)), store=self.store)
        with self.assertRaisesRegex(SpindleError, "columns names 3 columns but example has 2"):
            spindle.model.save(object(), "m", example=np.zeros((1, 2)), store=self.store, columns=["a", "b", "c"])
        self.assertFalse(os.listdir(self.store))


if __name__ == "__main__":
    unittest.main()
