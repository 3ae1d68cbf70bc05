"""The sizes of an nccl-tests-style sweep, shared by the Python benchmarks:
"64K", "1M", "2G" or plain bytes; -b to -e by factor -f."""


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1].upper() in scale:
        return int(float(text[:-1]) * scale[text[-1].upper()])
    return int(float(text))


def sweep_sizes(begin, end, factor):
    """Sizes from `begin` to `end` (strings or bytes), multiplying by
    `factor`."""
    begin = parse_size(begin) if isinstance(begin, str) else begin
    end = parse_size(end) if isinstance(end, str) else end
    sizes, s = [], float(begin)
    while s <= end * 1.0000001:
        sizes.append(int(s))
        s *= factor
    return sizes
