"""cc_grpc_proto: protoc + grpc_cpp_plugin from a genrule, against system libraries.

cc_grpc_proto(name = "ps") yields :ps_cc_proto (messages, links protobuf only) and
:ps_cc_grpc (services, links grpc++ too), so code that only uses messages stays off gRPC.
"""

def cc_grpc_proto(name, deps = []):
    """deps: names of other cc_grpc_proto targets here that this proto imports."""
    src = name + ".proto"
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + ".proto" for d in deps],
        outs = [name + ".pb.h", name + ".pb.cc", name + ".grpc.pb.h", name + ".grpc.pb.cc"],
        cmd = ("protoc --proto_path=. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin $(location %s)") % src,
    )
    native.cc_library(
        name = name + "_cc_proto",
        srcs = [name + ".pb.cc"],
        hdrs = [name + ".pb.h"],
        deps = ["@system_libs//:protobuf"] + [":" + d + "_cc_proto" for d in deps],
    )
    native.cc_library(
        name = name + "_cc_grpc",
        srcs = [name + ".grpc.pb.cc"],
        hdrs = [name + ".grpc.pb.h"],
        deps = [":" + name + "_cc_proto", "@system_libs//:grpc"],
    )
