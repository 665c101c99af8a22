#!/usr/bin/env python3
"""Train logistic regression with TensorFlow's ParameterServerStrategy.

A TensorFlow 2 parameter-server job has three roles, and Spindle runs
each as its own executors: the chief (``--chief``) coordinates and runs
the training loop, the workers and the parameter servers are TensorFlow
servers that run until the job ends. Spindle gives every process its
``TF_CONFIG`` (the cluster: chief, worker and ps addresses, and its own
task), ends the job when the chief ends, and then stops the servers::

    spindle submit --master 'local[2]' --chief --num-ps 1 \\
        --ps-command 'python3 examples/tensorflow/train_ps.py' \\
        --feed direct -- python3 examples/tensorflow/train_ps.py --steps 40

On a cluster (``--master yarn``, either deploy mode) the same line works:
Spindle ships this script, named in ``--ps-command`` as in the training
command, to every executor. Its hosts need a Python with TensorFlow; name
it with ``--python`` (``--python /opt/tf/bin/python3``, or a packed
environment: ``--archives tf-env.tar.gz#env --python env/bin/python``).

The workers run the steps the chief schedules on them; the variables live
on the parameter servers. The data is generated inside TensorFlow by each
worker (a linearly separable problem), so the job needs no input files;
Spindle's feed goes to workers, which in this strategy run no Python.

The chief prints ``tfps steps=N loss=... accuracy=...``; accuracy is that
of the final weights, read back from the parameter servers, on data drawn
the same way.
"""

import argparse
import json
import os
import socket
import sys
import time

import tensorflow as tf

FEATURES = 8


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40, help="training steps the chief schedules")
    p.add_argument("--batch", type=int, default=64, help="rows per step")
    p.add_argument("--lr", type=float, default=0.5, help="learning rate")
    p.add_argument("--wait", type=float, default=120, help="seconds the chief waits for the servers to listen")
    return p.parse_args(argv)


def true_weights():
    return tf.constant([[1.5], [-2.0], [0.5], [1.0], [-1.0], [2.0], [0.0], [-0.5]])


def make_dataset(seed, rows, batch):
    """A labelled, linearly separable data set, generated in the graph."""
    x = tf.random.stateless_normal([rows, FEATURES], seed=[seed, 7])
    y = tf.cast(tf.matmul(x, true_weights()) > 0, tf.float32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch)


def serve(resolver):
    """Workers and parameter servers: a TensorFlow server until stopped."""
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    print(f"tfps {resolver.task_type} {resolver.task_id} serving at {server.target}", flush=True)
    server.join()


def wait_for_servers(cluster, timeout):
    """Wait until every worker and ps listens (each imports TensorFlow first)."""
    deadline = time.monotonic() + timeout
    for role in ("worker", "ps"):
        for addr in cluster.get(role, []):
            host, _, port = addr.rpartition(":")
            while True:
                try:
                    socket.create_connection((host.strip("[]"), int(port)), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit(f"{role} at {addr} did not listen within {timeout}s")
                    time.sleep(0.2)


def coordinate(resolver, args):
    """The chief: schedules the training steps on the workers."""
    wait_for_servers(json.loads(os.environ["TF_CONFIG"])["cluster"], args.wait)
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(tf.zeros([FEATURES, 1]), name="w")
        b = tf.Variable(0.0, name="b")

    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(
            lambda ctx: make_dataset(1 + ctx.input_pipeline_id, 4096, args.batch))

    per_worker_iter = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    @tf.function
    def step(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                logits = tf.matmul(x, w) + b
                loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(args.lr * gw)
            b.assign_sub(args.lr * gb)
            return loss

        x, y = next(iterator)
        losses = strategy.run(replica_fn, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    result = None
    for _ in range(args.steps):
        result = coordinator.schedule(step, args=(per_worker_iter,))
    coordinator.join()
    loss = float(result.fetch())

    x, y = next(iter(make_dataset(99, 2048, 2048)))
    pred = tf.cast(tf.matmul(x, w.read_value()) + b.read_value() > 0, tf.float32)
    accuracy = float(tf.reduce_mean(tf.cast(tf.equal(pred, y), tf.float32)))
    cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]
    print(f"tfps steps={args.steps} loss={loss:.4f} accuracy={accuracy:.4f} "
          f"workers={len(cluster.get('worker', []))} ps={len(cluster.get('ps', []))}", flush=True)


def main(argv):
    args = parse_args(argv)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    role = os.environ.get("SPINDLE_ROLE", resolver.task_type)
    if role != resolver.task_type:
        sys.exit(f"SPINDLE_ROLE={role} but TF_CONFIG's task is {resolver.task_type}")
    if role == "chief":
        coordinate(resolver, args)
    else:
        serve(resolver)


if __name__ == "__main__":
    main(sys.argv[1:])
