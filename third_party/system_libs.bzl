"""Repository rules that wrap system libraries (Debian packages) for Bazel.

pkg_config_repository runs pkg-config once per entry of `packages` and writes a
cc_library whose linkopts are pkg-config's output, so BUILD files depend on
@system_libs//:absl_status, :protobuf, :grpc etc.; `unions` adds targets that
only bundle other targets of the repository (the deprecated :absl).
cuda_repository exposes /usr/local/cuda (or $CUDA_PATH) when present: :headers, and
:cuda (headers + cuBLAS + CUDA runtime); defs.bzl says CUDA_AVAILABLE. Without the
toolkit, or with DOWNPOUR_NO_CUDA=1 set, both targets are empty, CUDA_AVAILABLE is
False and worker/cuda builds its stubs (docs/GPU.md).
"""

def _pkg_config_impl(rctx):
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, pkgs in rctx.attr.packages.items():
        res = rctx.execute(["pkg-config", "--libs"] + pkgs)
        if res.return_code != 0:
            fail("pkg-config could not find %s: %s\nInstall the Debian packages listed in docs/BUILDING.md (or run ./tests/run_all.sh, which installs them)." % (pkgs, res.stderr))
        flags = res.stdout.strip().split(" ")
        cflags = rctx.execute(["pkg-config", "--cflags"] + pkgs).stdout.strip()
        copts = [f for f in cflags.split(" ") if f and not f.startswith("-I")]
        build.append("cc_library(")
        build.append('    name = "%s",' % name)
        build.append("    linkopts = %s," % repr([f for f in flags if f]))
        build.append("    defines = %s," % repr([f[2:] for f in copts if f.startswith("-D")]))
        build.append(")")
        build.append("")
    for name, members in rctx.attr.unions.items():
        for m in members:
            if m not in rctx.attr.packages:
                fail("union %s names %s, which is not in packages" % (name, m))
        build.append("cc_library(")
        build.append('    name = "%s",' % name)
        build.append("    deps = %s," % repr([":" + m for m in members]))
        build.append(")")
        build.append("")
    rctx.file("BUILD", "\n".join(build))
    rctx.file("WORKSPACE", 'workspace(name = "%s")' % rctx.name)

pkg_config_repository = repository_rule(
    implementation = _pkg_config_impl,
    attrs = {
        # target name -> pkg-config packages whose --libs it links
        "packages": attr.string_list_dict(),
        # target name -> names in `packages` it bundles (no link options of its own)
        "unions": attr.string_list_dict(),
    },
    local = True,
)

def _cuda_impl(rctx):
    root = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = rctx.path(root + "/bin/nvcc")
    has = nvcc.exists and rctx.os.environ.get("DOWNPOUR_NO_CUDA", "") == ""
    rctx.file("WORKSPACE", 'workspace(name = "%s")' % rctx.name)
    if has:
        rctx.symlink(root + "/include", "include")
        rctx.file("defs.bzl", 'CUDA_AVAILABLE = True\nNVCC = "%s"\nCUDA_ROOT = "%s"\n' % (nvcc, root))
        rctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
# The headers alone: for code compiled against CUDA but linked with a stand-in
# runtime (worker/cuda's host emulation for tests).
cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.inl"]),
    includes = ["include"],
)
# Headers plus cuBLAS and the CUDA runtime.
cc_library(
    name = "cuda",
    linkopts = ["-L%s/lib64", "-lcublas", "-lcudart", "-Wl,-rpath,%s/lib64"],
    deps = [":headers"],
)
""" % (root, root))
    else:
        rctx.file("defs.bzl", 'CUDA_AVAILABLE = False\nNVCC = ""\nCUDA_ROOT = ""\n')
        rctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "headers")
cc_library(name = "cuda")
""")

cuda_repository = repository_rule(
    implementation = _cuda_impl,
    environ = ["CUDA_PATH", "DOWNPOUR_NO_CUDA"],
    local = True,
)
