"""downpour.Predictor: predictions of a serving daemon (serve/,
docs/SERVING.md) from Python.

    predictor = downpour.Predictor("127.0.0.1:7300", "job.yaml")
    probabilities = predictor.predict(x)        # dense rows [n, features]

The daemon serves a model `psctl export` wrote from the ps's checkpoints,
whoever trained it (a C++ or a Python worker), and standardizes the raw
rows with the model's input_mean and input_std. The job's YAML gives the
security section (TLS, the worker token), as for the Client.
"""

import grpc
import numpy as np

from . import _rpc
from . import config as config_lib


class Predictor:
    """A client of one serving daemon at `address`."""

    def __init__(self, address, config, timeout_s=30.0):
        self.config = (config if isinstance(config, config_lib.JobConfig)
                       else config_lib.load(config))
        self._stub = _rpc.PredictorStub(_rpc.make_channel(
            address, self.config, "client"))
        self.timeout_s = timeout_s

    def predict(self, x, margins=False):
        """The probabilities (or with margins=True the raw outputs) of dense
        rows `x` [n, features]: [n, classes] for a multiclass model, [n]
        otherwise. DownpourError with the daemon's reason when it refuses."""
        from ._proto import serve_pb2
        from .client import DownpourError
        x = np.ascontiguousarray(x, dtype="<f4")
        if x.ndim != 2:
            raise ValueError("predict: x must be [examples, features], got "
                             "shape %s" % (x.shape,))
        request = serve_pb2.PredictRequest(dense=x.tobytes(),
                                           features=x.shape[1])
        try:
            reply = self._stub.Predict(request, timeout=self.timeout_s,
                                       wait_for_ready=True)
        except grpc.RpcError as e:
            raise DownpourError("predict: %s" % e.details(), e.code())
        out = np.frombuffer(reply.margins if margins or not
                            reply.probabilities else reply.probabilities,
                            dtype="<f4")
        return out.reshape(len(x), -1) if reply.outputs > 1 else out
