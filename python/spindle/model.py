"""Saving trained models as ONNX into Spindle's model store.

``spindle.model.save(model, "ctr", example=batch)`` exports a PyTorch
module (``torch.onnx.export``), a Keras/TensorFlow model (``tf2onnx``, when
installed) or a scikit-learn estimator (``skl2onnx``, when installed) to
ONNX and publishes it as the next version of ``ctr`` in the model store:
``STORE/ctr/VERSION/model.onnx`` with a ``manifest.json`` recording the
job, the feed's columns and label, the last values given to
:func:`spindle.report`, and the frameworks' versions. Inside a job the
store is the job's (``spindle.models.dir``, given to the process as
SPINDLE_MODELS_DIR); elsewhere pass ``store=``. Publishing runs
``spindle model publish``, so a store on HDFS works as a local one, and a
version appears whole or not at all.

The model takes one float32 matrix named ``features`` (rows x feature
columns, the columns in the manifest's feed schema order), as
``spindle.tensors()`` gives it; a batch of ``spindle.batches()`` (a dict of
columns) is stacked into one.
"""

import collections
import json
import os
import re
import subprocess
import tempfile

from . import _contract
from ._errors import SpindleError

#: The environment variable giving a training process the job's model store.
MODELS_DIR = _contract.MODELS_DIR

#: The name of the exported graph's input.
INPUT_NAME = "features"

#: The ONNX operator set models are exported with.
DEFAULT_OPSET = 13

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

#: A published version: its name, number, and directory (path or URI).
Version = collections.namedtuple("Version", "name version uri")


def save(model, name, example=None, store=None, columns=None, label=None, metrics=None, framework=None, opset=DEFAULT_OPSET):
    """Export model to ONNX and publish it as the next version of name; return its :class:`Version`.

    example is a batch the model takes: ``(features, labels)`` from
    ``spindle.tensors()``, a features matrix, or a dict of columns from
    ``spindle.batches()`` (the label column left out). columns names the
    feature columns when example does not (default: the dict's keys);
    label the label column (default: the job's). metrics default to the
    last values reported with :func:`spindle.report`. framework is
    "torch", "tensorflow" or "sklearn" (default: found from the model).
    """
    if not _NAME.match(name or ""):
        raise SpindleError(f"spindle.model.save: model name {name!r}: want letters, digits, '.', '_' or '-' (at most 128)")
    store = store or os.environ.get(MODELS_DIR)
    if not store:
        raise SpindleError("spindle.model.save: no model store: set spindle.models.dir for the job (or pass store=)")
    if example is None:
        raise SpindleError("spindle.model.save: pass example=, a batch the model takes, to trace its input")
    label = label if label is not None else os.environ.get(_contract.LABEL_COLUMN) or None
    features, columns = _features(example, columns, label)
    framework = framework or _framework(model)
    exporter = _EXPORTERS.get(framework)
    if exporter is None:
        raise SpindleError(f"spindle.model.save: framework {framework!r}: want one of {', '.join(sorted(_EXPORTERS))}")
    with tempfile.TemporaryDirectory(prefix="spindle-model-") as tmp:
        versions = exporter(model, features, os.path.join(tmp, "model.onnx"), opset)
        manifest = {"format": "onnx", "frameworks": versions}
        job = os.environ.get(_contract.JOB_ID)
        if job:
            manifest["job_id"] = job
        if columns:
            manifest["feed"] = {"schema": [{"name": c, "type": "float32"} for c in columns]}
            if label:
                manifest["feed"]["label"] = label
        reported = metrics if metrics is not None else _last_metrics()
        if reported:
            manifest["metrics"] = {k: float(v) for k, v in reported.items()}
        mpath = os.path.join(tmp, ".manifest.json")
        with open(mpath, "w", encoding="utf-8") as f:
            json.dump(manifest, f)
        return _publish(tmp, name, store, mpath)


def _features(example, columns, label):
    """Return example's features as a float32 matrix, and the feature columns' names (or None)."""
    import numpy as np

    if isinstance(example, dict):
        names = [c for c in (columns or example.keys()) if c != label]
        x = np.column_stack([np.asarray(example[c], dtype=np.float32) for c in names])
        return x, names
    if isinstance(example, tuple):
        example = example[0]
    if hasattr(example, "detach"):  # a torch tensor
        example = example.detach().cpu().numpy()
    x = np.asarray(example, dtype=np.float32)
    if x.ndim != 2:
        raise SpindleError(f"spindle.model.save: example has shape {x.shape}: want a (rows, features) matrix")
    if columns is not None and len(columns) != x.shape[1]:
        raise SpindleError(f"spindle.model.save: columns names {len(columns)} columns but example has {x.shape[1]} features")
    return x, list(columns) if columns else None


def _framework(model):
    """Name the framework model comes from, by the module of its classes."""
    for cls in type(model).__mro__:
        root = (cls.__module__ or "").split(".")[0]
        if root == "torch":
            return "torch"
        if root in ("keras", "tensorflow", "tf_keras"):
            return "tensorflow"
        if root == "sklearn":
            return "sklearn"
    raise SpindleError(f"spindle.model.save: cannot tell the framework of {type(model).__name__}: pass framework=")


def _export_torch(model, x, path, opset):
    import torch

    was_training = model.training
    model.eval()
    try:
        torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=[INPUT_NAME], output_names=["output"],
                          dynamic_axes={INPUT_NAME: {0: "N"}, "output": {0: "N"}}, opset_version=opset)
    finally:
        model.train(was_training)
    return {"torch": torch.__version__}


def _export_sklearn(model, x, path, opset):
    try:
        import skl2onnx
        from skl2onnx.common.data_types import FloatTensorType
    except ImportError:
        raise SpindleError("spindle.model.save: scikit-learn models need skl2onnx (pip install skl2onnx)") from None
    import sklearn

    # Classifiers give their probabilities as a matrix, not a list of maps.
    options = {id(model): {"zipmap": False}} if hasattr(model, "classes_") else None
    onx = skl2onnx.convert_sklearn(model, initial_types=[(INPUT_NAME, FloatTensorType([None, x.shape[1]]))],
                                   target_opset={"": opset, "ai.onnx.ml": 3}, options=options)
    with open(path, "wb") as f:
        f.write(onx.SerializeToString())
    return {"sklearn": sklearn.__version__, "skl2onnx": skl2onnx.__version__}


def _export_tensorflow(model, x, path, opset):
    try:
        import tf2onnx
    except ImportError:
        raise SpindleError("spindle.model.save: TensorFlow models need tf2onnx (pip install tf2onnx)") from None
    import tensorflow as tf

    spec = (tf.TensorSpec((None, x.shape[1]), tf.float32, name=INPUT_NAME),)
    # Keras models are called in inference mode (dropout off, batch norm's moving statistics).
    kwargs = {"training": False} if hasattr(model, "call") else {}

    # Traced as a function rather than with tf2onnx.convert.from_keras, which
    # cannot name the outputs of Keras 3 models (tf2onnx 1.17 raises KeyError
    # 'keras_tensor_N'); a function works for Keras 2 and 3 alike.
    @tf.function(input_signature=spec)
    def serve(features):
        return _named_outputs(model(features, **kwargs))

    try:
        tf2onnx.convert.from_function(serve, input_signature=spec, opset=opset, output_path=path)
        problem, cause = _unconverted_ops(path, opset), None
    except Exception as e:  # noqa: BLE001 (the converter raises anything; say which model and versions)
        problem, cause = f"{type(e).__name__}: {e}", e
    if problem:
        raise SpindleError(f"spindle.model.save: tf2onnx {tf2onnx.__version__} (TensorFlow {tf.__version__}) "
                           f"could not convert {type(model).__name__}: {problem}") from cause
    return {"tensorflow": tf.__version__, "tf2onnx": tf2onnx.__version__}


def _unconverted_ops(path, opset):
    """Say which TensorFlow ops tf2onnx left in the graph at path unconverted, or return "".

    tf2onnx converts on past an op it has no ONNX form for and writes the
    TensorFlow op as it is, giving a model no ONNX runtime loads; such a
    node is in the standard domain with an op type ONNX does not define.
    """
    import onnx

    bad = []

    def walk(graph):
        for node in graph.node:
            if node.domain == "" and not onnx.defs.has(node.op_type, opset):
                bad.append(f"{node.op_type} ({node.name})")
            for attr in node.attribute:  # the bodies of If, Loop and Scan
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    walk(sub)

    walk(onnx.load(path, load_external_data=False).graph)
    if not bad:
        return ""
    return (f"TensorFlow ops with no ONNX form at opset {opset}: {', '.join(bad)} "
            "(pass a higher opset=, or keep them out of the model's inference path)")


def _named_outputs(out):
    """Name a model's outputs for the ONNX graph: "output" for one tensor, output_0, output_1, ... for several, a dict's own keys."""
    if isinstance(out, dict):
        return dict(out)
    if isinstance(out, (list, tuple)):
        if len(out) == 1:
            return {"output": out[0]}
        return {f"output_{i}": o for i, o in enumerate(out)}
    return {"output": out}


_EXPORTERS = {"torch": _export_torch, "sklearn": _export_sklearn, "tensorflow": _export_tensorflow}


def _last_metrics():
    from . import _report

    return dict(_report.last_values)


def _binary():
    """Return the spindle binary: $SPINDLE_BINARY, the executor that started this process, or the usual places."""
    env = os.environ.get(_contract.BINARY)
    if env:
        return env
    try:  # a training process is the child of `spindle executor`
        parent = os.readlink(f"/proc/{os.getppid()}/exe")
        if os.path.basename(parent).startswith("spindle") and os.access(parent, os.X_OK):
            return parent
    except OSError:
        pass
    from ._submit import binary

    return binary()


def _publish(directory, name, store, manifest):
    """Publish directory as the next version of name with spindle model publish."""
    cmd = [_binary(), "model", "publish", directory, "--name", name, "--store", store, "--manifest", manifest]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        msg = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit status {proc.returncode}"
        raise SpindleError(f"spindle.model.save: publish {name} into {store}: {msg}")
    m = re.search(r"published (\S+)/(\d+) -> (\S+)", proc.stdout)
    if not m:
        raise SpindleError(f"spindle.model.save: spindle model publish said {proc.stdout!r}")
    return Version(m.group(1), int(m.group(2)), m.group(3))
