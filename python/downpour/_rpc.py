"""Hand-written gRPC stubs over the protoc-generated messages (no grpc_tools):
one `channel.unary_unary` per method the client calls, and channels set up as
rpc/server_util.cc's MakeChannel sets them (message size, reconnect backoff,
keepalive, TLS and the role token)."""

import grpc

from . import config as config_lib

try:
    from ._proto import coordinator_pb2, ps_pb2
except ImportError as e:  # pragma: no cover - said once, clearly
    raise ImportError(
        "downpour: the protobuf modules are missing (%s): run "
        "python/build_protos.sh (python/install.sh runs it)" % e) from e

_MAX_MESSAGE_BYTES = 64 << 20  # rpc/server_util.h kMaxMessageBytes

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.min_reconnect_backoff_ms", 5000),
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


def _credentials(cfg, name):
    """TLS channel credentials with the worker token, as rpc/security.cc makes
    them for a process named `name` in role worker; None for plaintext."""
    if not cfg.tls:
        return None

    def read(path):
        with open(path.replace("{name}", name), "rb") as f:
            return f.read()

    key = cert = None
    if cfg.cert_file and cfg.key_file:  # mutual TLS: this worker's pair
        key, cert = read(cfg.key_file), read(cfg.cert_file)
    creds = grpc.ssl_channel_credentials(read(cfg.ca_file), key, cert)
    if cfg.worker_token_file:
        # rpc/security.cc TokenSender: "authorization: Bearer <token>".
        token = config_lib.read_token(cfg.worker_token_file)
        creds = grpc.composite_channel_credentials(
            creds, grpc.access_token_call_credentials(token))
    return creds


def make_channel(address, cfg, name):
    """A channel to `address` as worker `name` ("worker-0")."""
    options = list(_CHANNEL_OPTIONS)
    creds = _credentials(cfg, name)
    if creds is None:
        return grpc.insecure_channel(address, options=options)
    if cfg.server_name:
        options.append(("grpc.ssl_target_name_override", cfg.server_name))
    return grpc.secure_channel(address, creds, options=options)


def _method(channel, service, name, request, response):
    return channel.unary_unary(
        "/downpour.proto.%s/%s" % (service, name),
        request_serializer=request.SerializeToString,
        response_deserializer=response.FromString)


class CoordinatorStub:
    """The Coordinator methods a worker calls."""

    def __init__(self, channel):
        c = coordinator_pb2
        m = lambda n, q, r: _method(channel, "Coordinator", n, q, r)  # noqa
        self.RegisterWorker = m("RegisterWorker", c.RegisterWorkerRequest,
                                c.RegisterWorkerResponse)
        self.Heartbeat = m("Heartbeat", c.HeartbeatRequest,
                           c.HeartbeatResponse)
        self.GetPlacement = m("GetPlacement", c.GetPlacementRequest,
                              c.GetPlacementResponse)
        self.DescribeModel = m("DescribeModel", c.DescribeModelRequest,
                               c.DescribeModelResponse)
        self.ClusterStatus = m("ClusterStatus", c.ClusterStatusRequest,
                               c.ClusterStatusResponse)


class PredictorStub:
    """The serving daemon's methods (proto/serve.proto)."""

    def __init__(self, channel):
        from ._proto import serve_pb2 as v
        self.Predict = _method(channel, "Predictor", "Predict",
                               v.PredictRequest, v.PredictResponse)


class ParameterServerStub:
    """The ParameterServer methods a worker calls."""

    def __init__(self, channel):
        p = ps_pb2
        m = lambda n, q, r: _method(channel, "ParameterServer", n, q, r)  # noqa
        self.Pull = m("Pull", p.PullRequest, p.PullResponse)
        self.Push = m("Push", p.PushRequest, p.PushResponse)
        self.Checksums = m("Checksums", p.ChecksumRequest, p.ChecksumResponse)
        self.Lookup = m("Lookup", p.LookupRequest, p.LookupResponse)


def serve_status(listen, cfg, name, fill):
    """Serves the Status service (proto/status.proto) on `listen` ("host:port",
    port 0 = any) with fill() as GetStatus's answer, as every daemon does:
    psctl reads it, and the coordinator asks it which incarnation answers at
    the worker's address. Returns (server, "host:bound_port")."""
    from concurrent import futures

    from ._proto import status_pb2

    handler = grpc.method_handlers_generic_handler("downpour.proto.Status", {
        "GetStatus": grpc.unary_unary_rpc_method_handler(
            lambda request, context: fill(),
            request_deserializer=status_pb2.GetStatusRequest.FromString,
            response_serializer=status_pb2.GetStatusResponse.SerializeToString),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         handlers=(handler,))
    if cfg.tls:
        if not (cfg.cert_file and cfg.key_file):
            raise NotImplementedError(
                "downpour: under security.tls the Python worker's Status "
                "service needs security.cert_file and key_file (a worker "
                "certificate); serve_status=False runs without it")

        def read(path):
            with open(path.replace("{name}", name), "rb") as f:
                return f.read()
        creds = grpc.ssl_server_credentials([(read(cfg.key_file),
                                              read(cfg.cert_file))])
        port = server.add_secure_port(listen, creds)
    else:
        port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError("downpour: cannot listen on %s" % listen)
    server.start()
    host = listen.rsplit(":", 1)[0]
    if host in ("0.0.0.0", "[::]", ""):
        import socket
        host = socket.gethostname()
    return server, "%s:%d" % (host, port)
