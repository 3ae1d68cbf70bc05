#include "tools/bench/shapes_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace hvd::bench {

bool ReadShapes(const std::string& path,
                std::vector<std::vector<int64_t>>* shapes) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read the shapes file %s\n", path.c_str());
    return false;
  }
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream dims(line);
    std::vector<int64_t> shape;
    for (int64_t d; dims >> d;) shape.push_back(d);
    shapes->push_back(std::move(shape));
  }
  return true;
}

}  // namespace hvd::bench
