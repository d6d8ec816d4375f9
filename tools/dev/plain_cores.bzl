"""plain_cores_test: a test that fails when a core library gains a path to gRPC.

Core classes are plain C++ (STYLE.md, "Layout"; docs/ARCHITECTURE.md): no
grpcpp, no *_cc_grpc, nothing that links them, not even through a dep several
levels down. Bazel's visibility cannot say "no package of cores may see the
gRPC plumbing", since the adapters beside the cores in the same package must,
so this query is the enforcement:

    load("//tools/dev:plain_cores.bzl", "plain_cores_test")
    plain_cores_test(
        name = "plain_cores_test",
        cores = [":block_store", ":shard"],
    )

It is defined once per package (a genquery may only name targets visible to
it, and cores are private to their package). The test prints every listed core
that reaches @system_libs//:grpc and one dependency path from a core to it.
"""

_GRPC = "@system_libs//:grpc"

def plain_cores_test(name, cores, **kwargs):
    """cores: labels of this package's (or visible) plain core libraries."""
    labels = []
    for core in cores:
        if core.startswith(":"):
            labels.append("//%s%s" % (native.package_name(), core))
        else:
            labels.append(core)
    universe = "set(%s)" % " ".join(labels)

    # The scope names gRPC too: a query may only mention targets inside it,
    # and a clean core set does not reach it.
    scope = cores + [_GRPC]
    native.genquery(
        name = name + "_offenders",
        expression = "%s intersect rdeps(%s, %s)" % (universe, universe, _GRPC),
        scope = scope,
    )
    native.genquery(
        name = name + "_path",
        expression = "somepath(%s, %s)" % (universe, _GRPC),
        scope = scope,
    )
    native.sh_test(
        name = name,
        size = "small",
        srcs = ["//tools/dev:plain_cores_test.sh"],
        args = [
            "$(location :%s_offenders)" % name,
            "$(location :%s_path)" % name,
        ],
        data = [
            ":%s_offenders" % name,
            ":%s_path" % name,
        ],
        **kwargs
    )
