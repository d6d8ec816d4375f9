"""Downpour's Python client: a worker process that registers with the
coordinator and pulls and pushes dense blocks and sparse rows as NumPy arrays
over the same byte wire as the C++ worker. docs/PYTHON.md shows how.

    import downpour
    with downpour.Client("job.yaml", index=0) as client:
        params, versions = client.pull()
        client.push(grad, versions)

downpour.feature_hash needs nothing but Python; downpour.Client needs Debian's
python3-grpcio, python3-protobuf, python3-numpy and python3-yaml, and the
modules python/build_protos.sh generates (python/install.sh runs it).
downpour.torch (EmbeddingBag, DenseOnPs) adds PyTorch modules whose
parameters live on the ps; it needs Debian's python3-torch.
"""

__version__ = "0.1.0"

from . import feature_hash  # noqa: F401  (no dependencies)


def __getattr__(name):
    # Client and its errors load gRPC, protobuf and NumPy only when asked for,
    # so that `downpour.feature_hash` works without them.
    if name in ("Client", "DownpourError", "PushResult"):
        from . import client
        return getattr(client, name)
    if name == "Predictor":
        from .predict import Predictor
        return Predictor
    raise AttributeError("module 'downpour' has no attribute %r" % name)
