"""Finds CUDA + NCCL at /usr/local/cuda (or $HVD_CUDA_HOME).

Writes @local_cuda//:defs.bzl with HAVE_CUDA, so the GPU backend is built
wherever the toolkit exists and left out (not stubbed) where it does not.
"""

def _cuda_configure_impl(ctx):
    home = ctx.os.environ.get("HVD_CUDA_HOME", "/usr/local/cuda")
    have = ctx.path(home + "/include/nccl.h").exists and ctx.path(home + "/include/cuda_runtime.h").exists
    if have:
        ctx.symlink(home + "/include", "include")
        ctx.symlink(home + "/lib64", "lib64")
        build = """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda",
    hdrs = glob(["include/**"]),
    includes = ["include"],
    linkopts = ["-L%s/lib64", "-Wl,-rpath,%s/lib64", "-lnccl", "-lcudart"],
)
""" % (home, home)
    else:
        build = """
package(default_visibility = ["//visibility:public"])
"""
    ctx.file("BUILD", build)
    ctx.file("defs.bzl", "HAVE_CUDA = %s\nCUDA_HOME = %r\n" % (have, home))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["HVD_CUDA_HOME"],
    local = True,
)
