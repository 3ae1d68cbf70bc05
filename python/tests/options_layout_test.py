"""hvd/_lib.py's Options is a hand-made copy of core/c_api.h's hvd_options:
these tests fail when the two layouts disagree (a field added, removed,
reordered or retyped on one side only), and check that the library refuses
options whose struct_size it does not know. No hvdrun, no init.
"""

import ctypes
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from hvd import _lib  # noqa: E402


def library_layout():
    """(sizeof, [(name, offset, size), ...]) of hvd_options, as the library
    was compiled (hvd_options_layout())."""
    text = _lib.decode(_lib.lib().hvd_options_layout())
    size, *fields = text.split(";")
    parsed = []
    for field in fields:
        name, offset, field_size = field.split()
        parsed.append((name, int(offset), int(field_size)))
    return int(size), parsed


def ctypes_layout(structure):
    """The same description of a ctypes Structure."""
    return ctypes.sizeof(structure), [
        (name, getattr(structure, name).offset, getattr(structure, name).size)
        for name, _ in structure._fields_]


def test_python_options_have_the_librarys_fields_offsets_and_sizes():
    c_size, c_fields = library_layout()
    py_size, py_fields = ctypes_layout(_lib.Options)
    assert py_fields == c_fields
    assert py_size == c_size


def test_a_copy_missing_a_field_is_told_apart():
    class Stale(ctypes.Structure):  # Options before a field was added
        _fields_ = [f for f in _lib.Options._fields_ if f[0] != "dtype"]

    assert ctypes_layout(Stale) != library_layout()


def test_default_options_carry_this_copys_size():
    assert _lib.default_options().struct_size == ctypes.sizeof(_lib.Options)


def wait_error(handle):
    lib = _lib.lib()
    assert lib.hvd_wait(handle, 30.0) == _lib.HVD_ERROR
    error = _lib.decode(lib.hvd_handle_error(handle))
    lib.hvd_release(handle)
    return error


@pytest.mark.parametrize("wrong", [0, 8, ctypes.sizeof(_lib.Options) + 8])
def test_library_refuses_an_unknown_struct_size(wrong):
    options = _lib.default_options()
    options.struct_size = wrong
    error = wait_error(_lib.lib().hvd_barrier_async(ctypes.byref(options)))
    expected = ("hvd_options.struct_size is %d but this libhvd.so's "
                "hvd_options has %d bytes" % (wrong,
                                              ctypes.sizeof(_lib.Options)))
    assert expected in error
    assert _lib.decode(_lib.lib().hvd_last_error()) == error


def test_library_takes_default_options():
    options = _lib.default_options()
    error = wait_error(_lib.lib().hvd_barrier_async(ctypes.byref(options)))
    assert "hvd is not initialized" in error


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):  # under bazel test: per-case report
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
