// Tensor shapes from a file of one shape a line, its dimensions separated
// by spaces ("64 3 7 7"), '#' lines comments: resnet50_shapes.txt, which
// resnet50_shapes.py writes. Python's reader is shapes_file.py.
#ifndef HVD_TOOLS_BENCH_SHAPES_FILE_H_
#define HVD_TOOLS_BENCH_SHAPES_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hvd::bench {

// The shapes in `path`, in file order; false (and a line on stderr naming
// the file) when it cannot be read.
bool ReadShapes(const std::string& path,
                std::vector<std::vector<int64_t>>* shapes);

}  // namespace hvd::bench

#endif  // HVD_TOOLS_BENCH_SHAPES_FILE_H_
