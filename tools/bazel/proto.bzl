"""C++ code from .proto files with Debian's protoc and grpc_cpp_plugin."""

def hvd_cc_proto(name, src, grpc = False, deps = [], visibility = None):
    """cc_library `name` holding the generated code of `src` (one .proto).

    Args:
      name: the cc_library.
      src: the .proto file, in this package.
      grpc: also generate gRPC service stubs.
      deps: hvd_cc_proto targets whose .proto files `src` imports.
      visibility: of the cc_library.
    """
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    cmd = "protoc -I. --cpp_out=$(GENDIR) $(location %s)" % src
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        cmd += (" && protoc -I. --grpc_out=$(GENDIR)" +
                " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin" +
                " $(location %s)" % src)
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = cmd,
    )
    native.filegroup(name = name + "_srcs", srcs = [src])
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:grpc" if grpc else "//third_party:protobuf"],
        visibility = visibility,
    )
