"""hvd_fuzzer: one libFuzzer target and the replay test of its seed corpus."""

def hvd_fuzzer(name, srcs, deps, corpus):
    """Declares `name` and `name_replay`.

    `name` is the fuzzer: libFuzzer's main, built only by tools/fuzz/run.sh
    (clang, --config=fuzz); tagged manual so that //... leaves it out. `name_replay`
    is a test of the ordinary build that runs every file of `corpus` (a folder
    of this package) through the same LLVMFuzzerTestOneInput. Both can use
    tools/fuzz/input_reader.h.
    """
    deps = deps + ["//tools/fuzz:input_reader"]
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        deps = deps,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual", "fuzzer"],
    )
    native.cc_test(
        name = name + "_replay",
        size = "small",
        srcs = srcs,
        deps = deps + ["//tools/fuzz:replay_main"],
        args = ["%s/%s" % (native.package_name(), corpus)],
        data = native.glob([corpus + "/**"]),
    )
